/**
 * Plain counters and gauges, read by the heartbeat record and the health endpoint. Incrementing
 * is a property write: nothing on the 1 Hz path allocates or formats.
 */
export interface MetricSpec {
  help: string;
  type: 'counter' | 'gauge';
}

export const METRIC_SPECS = {
  pollsOk: { type: 'counter', help: 'IMDS scheduled events polls that returned a valid document' },
  pollsFailed: { type: 'counter', help: 'IMDS scheduled events polls that failed (after in-call retries)' },
  pollsNotModified: { type: 'counter', help: 'polls answered 304 Not Modified' },
  transitions: { type: 'counter', help: 'lifecycle transitions derived by the tracker' },
  stateSaveFailures: { type: 'counter', help: 'failed saves of the tracker state file' },
  recordsSkippedScope: { type: 'counter', help: 'lifecycle records not shipped because of --scope self' },
  recordsSpooled: { type: 'counter', help: 'records handed to the spool' },
  recordsSent: { type: 'counter', help: 'records confirmed by the sink' },
  sendFailures: { type: 'counter', help: 'sink sends that failed (each is retried)' },
  sendRetries: { type: 'counter', help: 'sends attempted again after a failure' },
  recordsRejected: {
    type: 'counter',
    help: 'records the sink can never take (too large), kept in spool/rejected',
  },
  spoolDrops: { type: 'counter', help: 'records dropped because the spool was full (heartbeats first)' },
  activeEvents: { type: 'gauge', help: 'events in the last IMDS document' },
  lastIncarnation: { type: 'gauge', help: 'DocumentIncarnation of the last document (-1 before the first)' },
  spoolDepth: { type: 'gauge', help: 'records waiting in the spool' },
  spoolBytes: { type: 'gauge', help: 'bytes of records waiting in the spool' },
  spoolMemoryHeld: { type: 'gauge', help: 'records held in memory only because the disk failed' },
  lastPollOkTimestampSeconds: { type: 'gauge', help: 'unix time of the last successful poll' },
  lastSendOkTimestampSeconds: { type: 'gauge', help: 'unix time of the last confirmed send' },
} as const satisfies Record<string, MetricSpec>;

export type MetricName = keyof typeof METRIC_SPECS;

export class Metrics {
  readonly values: Record<MetricName, number>;
  readonly startedAt: number;

  constructor(now = Date.now()) {
    this.startedAt = now;
    this.values = Object.fromEntries(Object.keys(METRIC_SPECS).map((k) => [k, 0])) as Record<
      MetricName,
      number
    >;
    this.values.lastIncarnation = -1;
  }

  inc(name: MetricName, by = 1): void {
    this.values[name] += by;
  }

  set(name: MetricName, value: number): void {
    this.values[name] = value;
  }

  uptimeSeconds(now = Date.now()): number {
    return Math.floor((now - this.startedAt) / 1000);
  }

  /** Prometheus text exposition format, names prefixed `se_shipper_` in snake case. */
  toPrometheus(now = Date.now()): string {
    const lines: string[] = [];
    const emit = (name: string, type: string, help: string, value: number) => {
      const metric = `se_shipper_${name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}${type === 'counter' ? '_total' : ''}`;
      lines.push(`# HELP ${metric} ${help}`, `# TYPE ${metric} ${type}`, `${metric} ${value}`);
    };
    for (const [name, spec] of Object.entries(METRIC_SPECS) as [MetricName, MetricSpec][]) {
      emit(name, spec.type, spec.help, this.values[name]);
    }
    emit('uptimeSeconds', 'gauge', 'seconds since the shipper started', this.uptimeSeconds(now));
    return `${lines.join('\n')}\n`;
  }
}
