// Scale sets only get Terminate (scale-in / delete) scheduled events when the scale set model has
// scheduledEventsProfile.terminateNotificationProfile enabled. An existing scale set cannot be
// patched partially from Bicep, so import this into the template that defines your scale set:
//
//   import { scheduledEventsProfile } from '<path>/infra/bicep/modules/scheduled-events-profile.bicep'
//   ...
//   virtualMachineProfile: {
//     scheduledEventsProfile: scheduledEventsProfile('PT10M')
//
// or, for a scale set managed elsewhere: az vmss update --enable-terminate-notification true
//   --terminate-notification-time 10 (see docs/deploy.md).

@export()
@description('scheduledEventsProfile for virtualMachineProfile: Terminate notification (5-15 min of notice) and OS image notification.')
func scheduledEventsProfile(notBeforeTimeout string) object => {
  terminateNotificationProfile: {
    enable: true
    notBeforeTimeout: notBeforeTimeout
  }
  osImageNotificationProfile: {
    enable: true
    notBeforeTimeout: 'PT15M'
  }
}
