/**
 * What the demo prints while records arrive: an aligned, coloured table on a terminal, the
 * records themselves as NDJSON otherwise (so `npm start | jq` works).
 */
import type { ShipperRecord } from '../lifecycle/record.js';

export interface ArrivedRecord {
  record: ShipperRecord;
  partitionId: string;
  sequenceNumber: number;
  duplicate: boolean;
}

const PHASE_COLOURS: Record<string, string> = {
  Scheduled: '\x1b[36m',
  Rescheduled: '\x1b[35m',
  Started: '\x1b[33m',
  Completed: '\x1b[32m',
  Canceled: '\x1b[90m',
};
const RESET = '\x1b[0m';
const BOLD = '\x1b[1m';
const DIM = '\x1b[2m';

export class LiveView {
  constructor(
    private readonly out: NodeJS.WriteStream,
    private readonly tty: boolean,
    private readonly colour: boolean,
  ) {}

  private paint(code: string, text: string): string {
    return this.colour ? `${code}${text}${RESET}` : text;
  }

  line(text = ''): void {
    if (this.tty) this.out.write(`${text}\n`);
  }

  heading(text: string): void {
    this.line(this.paint(BOLD, text));
  }

  note(text: string): void {
    this.line(this.paint(DIM, text));
  }

  tableHeader(): void {
    this.line(
      this.paint(
        BOLD,
        `${'observed'.padEnd(12)} ${'record'.padEnd(11)} ${'event'.padEnd(10)} ${'id'.padEnd(8)} ${'notBefore'.padEnd(9)} ${'this VM'.padEnd(7)} ${'hub p/seq'.padEnd(9)} note`,
      ),
    );
  }

  arrived(a: ArrivedRecord): void {
    if (!this.tty) {
      this.out.write(`${JSON.stringify(a.record)}\n`);
      return;
    }
    const r = a.record;
    const observed = r.observedAt.slice(11, 23);
    const where = `${a.partitionId}/${a.sequenceNumber}`.padEnd(9);
    if (r.recordType === 'heartbeat') {
      this.line(
        this.paint(
          DIM,
          `${observed.padEnd(12)} ${'heartbeat'.padEnd(11)} ${''.padEnd(10)} ${''.padEnd(8)} ${''.padEnd(9)} ${''.padEnd(7)} ${where} polls ${r.pollsOk} ok/${r.pollsFailed} failed, spool ${r.spoolDepth}`,
        ),
      );
      return;
    }
    const phase = this.paint(PHASE_COLOURS[r.phase] ?? '', r.phase.padEnd(11));
    const notBefore = r.notBefore ? r.notBefore.slice(11, 19) : '-';
    const notes = [
      r.inferred ? `inferred after ${r.gapSeconds}s gap` : '',
      a.duplicate ? 'duplicate (same recordId)' : '',
      r.eventType === 'Preempt' || r.eventType === 'Terminate'
        ? r.phase === 'Scheduled'
          ? 'page someone: VM goes away'
          : ''
        : '',
    ].filter(Boolean);
    this.line(
      `${observed.padEnd(12)} ${phase} ${r.eventType.padEnd(10)} ${r.eventId.slice(0, 8).padEnd(8)} ${notBefore.padEnd(9)} ${String(r.affectsThisVm).padEnd(7)} ${where} ${notes.join('; ')}`,
    );
  }
}
