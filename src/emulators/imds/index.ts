/** In-process API of the IMDS emulator (tests, the demo, users' own tests). */
export {
  BUILTIN_SCENARIO_NAMES,
  builtinScenario,
  builtinScenarioSummaries,
  TERMINATE_NOTICE_RANGE,
} from './builtins.js';
export { type Clock, createManualClock, type ManualClock, systemClock } from './clock.js';
export { createImdsEmulatorCommand, DEFAULT_EMULATOR_PORT, loadEmulatorConfigFile } from './command.js';
export { FAULT_KINDS, type FaultKind, type FaultRoute, type FaultSpec } from './faults.js';
export { resolveIdentity, type VmIdentity, type VmIdentityInput } from './identity.js';
export type { ApprovalRecord, EmulatedEvent, HistoryEntry, NotBeforeFormat } from './model.js';
export { LIFECYCLE_PHASE_OF_CHANGE, ScheduledEventsModel } from './model.js';
export {
  type EventSpec,
  loadScenarioFile,
  parseScenario,
  type Scenario,
  type ScenarioStep,
} from './scenario.js';
export {
  type ImdsEmulator,
  type ImdsEmulatorOptions,
  type RequestLogEntry,
  resolveScenario,
  startImdsEmulator,
} from './server.js';
export { ValidationError } from './validate.js';
