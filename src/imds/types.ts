/**
 * Shapes of the IMDS documents after validation by the IMDS client. Field names are IMDS's own
 * (PascalCase for scheduled events, camelCase for instance metadata). Unknown fields are
 * dropped by validation; unknown enum values (EventType, EventStatus) pass through as strings.
 */

export interface ScheduledEvent {
  EventId: string;
  /** Freeze, Reboot, Redeploy, Preempt, Terminate, or a value newer than this code. */
  EventType: string;
  ResourceType: string;
  Resources: string[];
  /** Scheduled or Started, or a value newer than this code. */
  EventStatus: string;
  /** As IMDS sent it: RFC 1123 in production, ISO 8601 in some emulators, '' when none. */
  NotBefore: string;
  Description: string;
  EventSource: string;
  /** -1 when unknown or absent (api-version older than 2020-07-01). */
  DurationInSeconds: number;
}

export interface ScheduledEventsDocument {
  DocumentIncarnation: number;
  Events: ScheduledEvent[];
}

/** The `compute` part of `/metadata/instance` the shipper uses; missing values are ''. */
export interface InstanceCompute {
  name: string;
  vmId: string;
  resourceId: string;
  subscriptionId: string;
  resourceGroupName: string;
  location: string;
  zone: string;
  vmSize: string;
  osType: string;
  priority: string;
  evictionPolicy: string;
  vmScaleSetName: string;
  computerName: string;
}
