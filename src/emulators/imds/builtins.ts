import { parseScenario, type Scenario } from './scenario.js';

export interface BuiltinOptions {
  /**
   * Notice of Terminate events in seconds: the scale set's
   * `terminateNotificationProfile.notBeforeTimeout`, PT5M..PT15M (300..900). Default 300.
   */
  terminateNoticeSeconds?: number;
}

export const TERMINATE_NOTICE_RANGE = { min: 300, max: 900 } as const;

type Builder = (o: Required<BuiltinOptions>) => unknown;

/** Built-in scenarios with real Azure timings (scenario seconds). Each one goes through the validator. */
const BUILDERS: Record<string, { summary: string; build: Builder }> = {
  idle: {
    summary: 'No events at all: an empty document (DocumentIncarnation stays put).',
    build: () => ({ name: 'idle', description: 'No events.', steps: [] }),
  },
  freeze: {
    summary:
      'Freeze of this VM: Scheduled with 15 min notice, starts by itself at NotBefore, gone 60 s later.',
    build: () => ({
      name: 'freeze',
      description: 'A memory-preserving maintenance (Freeze) of this VM with the minimum 15 min notice.',
      steps: [
        {
          at: 0,
          action: 'schedule',
          event: { ref: 'freeze', type: 'Freeze', notBefore: 900, duration: 5, startedFor: 60 },
        },
      ],
    }),
  },
  reboot: {
    summary: 'Reboot of this VM: 15 min notice, Started at NotBefore, gone 5 min later.',
    build: () => ({
      name: 'reboot',
      description: 'A platform Reboot of this VM with 15 min notice.',
      steps: [
        {
          at: 0,
          action: 'schedule',
          event: { ref: 'reboot', type: 'Reboot', notBefore: 900, startedFor: 300 },
        },
      ],
    }),
  },
  redeploy: {
    summary: 'Redeploy of this VM: 10 min notice, Started at NotBefore, gone 10 min later.',
    build: () => ({
      name: 'redeploy',
      description: 'A Redeploy (move to another host) of this VM with the minimum 10 min notice.',
      steps: [
        {
          at: 0,
          action: 'schedule',
          event: { ref: 'redeploy', type: 'Redeploy', notBefore: 600, startedFor: 600 },
        },
      ],
    }),
  },
  preempt: {
    summary: 'Spot eviction of this VM: Preempt with 30 s notice, Started at NotBefore, gone 2 min later.',
    build: () => ({
      name: 'preempt',
      description: 'A Spot eviction (Preempt) with the minimum 30 s notice.',
      steps: [
        {
          at: 0,
          action: 'schedule',
          event: { ref: 'preempt', type: 'Preempt', notBefore: 30, startedFor: 120 },
        },
      ],
    }),
  },
  terminate: {
    summary: 'Scale-in of this VM: Terminate (EventSource User) with the configured 5–15 min notice.',
    build: (o) => ({
      name: 'terminate',
      description: `A scale-set Terminate with notBeforeTimeout ${o.terminateNoticeSeconds} s.`,
      steps: [
        {
          at: 0,
          action: 'schedule',
          event: {
            ref: 'terminate',
            type: 'Terminate',
            source: 'User',
            notBefore: o.terminateNoticeSeconds,
            startedFor: 120,
          },
        },
      ],
    }),
  },
  cancel: {
    summary:
      'Reboot of this VM Scheduled with 15 min notice, then withdrawn after 5 min (disappears unstarted).',
    build: () => ({
      name: 'cancel',
      description: 'A Scheduled Reboot that Azure cancels before NotBefore.',
      steps: [
        { at: 0, action: 'schedule', event: { ref: 'reboot', type: 'Reboot', notBefore: 900 } },
        { at: 300, action: 'cancel', ref: 'reboot' },
      ],
    }),
  },
  reschedule: {
    summary: 'Redeploy of this VM whose NotBefore moves 10 min later while Scheduled, then runs.',
    build: () => ({
      name: 'reschedule',
      description: 'A Redeploy whose NotBefore is pushed back once.',
      steps: [
        {
          at: 0,
          action: 'schedule',
          event: { ref: 'redeploy', type: 'Redeploy', notBefore: 600, startedFor: 600 },
        },
        { at: 120, action: 'reschedule', ref: 'redeploy', notBefore: 1200 },
      ],
    }),
  },
  overlap: {
    summary: 'Overlapping events: a Freeze of this VM, a Reboot of this VM and a peer, both Started at once.',
    build: () => ({
      name: 'overlap',
      description: 'Two events of this VM overlap; the Reboot also affects another instance of the set.',
      steps: [
        {
          at: 0,
          action: 'schedule',
          event: { ref: 'freeze', type: 'Freeze', notBefore: 900, duration: 5, startedFor: 180 },
        },
        {
          at: 60,
          action: 'schedule',
          event: {
            ref: 'reboot',
            type: 'Reboot',
            resources: ['$self', '$peer:1'],
            notBefore: 900,
            startedFor: 300,
          },
        },
      ],
    }),
  },
  'hardware-failure': {
    summary: 'Unplanned Reboot after a hardware failure: appears directly as Started, gone 10 min later.',
    build: () => ({
      name: 'hardware-failure',
      description: 'A host failure: the Reboot event is first seen Started, with no NotBefore.',
      steps: [
        {
          at: 0,
          action: 'start',
          event: {
            ref: 'reboot',
            type: 'Reboot',
            description:
              'Virtual machine is going to be restarted because of a hardware failure on the host.',
            startedFor: 600,
          },
        },
      ],
    }),
  },
  'other-vms': {
    summary: 'Events for other instances of the set only (scope self must ship nothing).',
    build: () => ({
      name: 'other-vms',
      description: 'Broadcast events of the placement group that do not affect this VM.',
      steps: [
        {
          at: 0,
          action: 'schedule',
          event: {
            ref: 'peer-reboot',
            type: 'Reboot',
            resources: ['$peer:1'],
            notBefore: 900,
            startedFor: 300,
          },
        },
        {
          at: 30,
          action: 'schedule',
          event: {
            ref: 'peer-freeze',
            type: 'Freeze',
            resources: ['$peer:2', '$peer:3'],
            notBefore: 900,
            duration: 5,
            startedFor: 60,
          },
        },
        { at: 600, action: 'cancel', ref: 'peer-freeze' },
      ],
    }),
  },
  demo: {
    summary:
      'Demo at speed 60 (~31 s with the default 5 min Terminate notice): Freeze, Redeploy, Reboot, a canceled Reboot, a peer Reboot, Preempt, Terminate.',
    build: (o) => ({
      name: 'demo',
      description: 'Every kind of event of this VM, a cancellation and a peer event, at dev timing.',
      speed: 60,
      steps: [
        {
          at: 0,
          action: 'schedule',
          event: { ref: 'freeze', type: 'Freeze', notBefore: 900, duration: 5, startedFor: 120 },
        },
        {
          at: 60,
          action: 'schedule',
          event: {
            ref: 'peer-reboot',
            type: 'Reboot',
            resources: ['$peer:1'],
            notBefore: 900,
            startedFor: 240,
          },
        },
        {
          at: 120,
          action: 'schedule',
          event: { ref: 'reboot', type: 'Reboot', notBefore: 900, startedFor: 240 },
        },
        {
          at: 180,
          action: 'schedule',
          event: { ref: 'redeploy', type: 'Redeploy', notBefore: 600, startedFor: 420 },
        },
        { at: 240, action: 'schedule', event: { ref: 'canceled-reboot', type: 'Reboot', notBefore: 900 } },
        { at: 540, action: 'cancel', ref: 'canceled-reboot' },
        // Preempt notice stretched from 30 s to 120 s: at speed 60 a 1 Hz poller still sees it Scheduled.
        {
          at: 1260,
          action: 'schedule',
          event: { ref: 'preempt', type: 'Preempt', notBefore: 120, startedFor: 120 },
        },
        {
          at: 1440,
          action: 'schedule',
          event: {
            ref: 'terminate',
            type: 'Terminate',
            source: 'User',
            notBefore: o.terminateNoticeSeconds,
            startedFor: 120,
          },
        },
      ],
    }),
  },
};

export const BUILTIN_SCENARIO_NAMES: readonly string[] = Object.keys(BUILDERS);

export function builtinScenarioSummaries(): { name: string; summary: string }[] {
  return Object.entries(BUILDERS).map(([name, b]) => ({ name, summary: b.summary }));
}

export function isBuiltinScenario(name: string): boolean {
  return Object.hasOwn(BUILDERS, name);
}

export function builtinScenario(name: string, options: BuiltinOptions = {}): Scenario {
  const builder = BUILDERS[name];
  if (!builder || !Object.hasOwn(BUILDERS, name)) {
    throw new Error(
      `unknown built-in scenario ${JSON.stringify(name)} (known: ${BUILTIN_SCENARIO_NAMES.join(', ')})`,
    );
  }
  const terminateNoticeSeconds = options.terminateNoticeSeconds ?? 300;
  if (
    !Number.isFinite(terminateNoticeSeconds) ||
    terminateNoticeSeconds < TERMINATE_NOTICE_RANGE.min ||
    terminateNoticeSeconds > TERMINATE_NOTICE_RANGE.max
  ) {
    throw new RangeError(
      `terminate notice must be between ${TERMINATE_NOTICE_RANGE.min} and ${TERMINATE_NOTICE_RANGE.max} seconds (PT5M..PT15M), got ${terminateNoticeSeconds}`,
    );
  }
  return parseScenario(builder.build({ terminateNoticeSeconds }), `builtin:${name}`);
}
