// Built-in Azure role definition ids used by the sink. Named constants, imported where needed
// (`import { builtInRoleIds } from 'roles.bicep'`) and checked by test/infra/bicep.test.ts
// against the documented ids, so Sender and Receiver can never be swapped silently.

@export()
@description('Built-in role definition ids (GUIDs, identical in every Azure tenant).')
var builtInRoleIds = {
  eventHubsDataSender: '2b629674-e913-4c01-ae53-ef4638d8f975'
  eventHubsDataReceiver: 'a638d3c7-ab3a-418d-83e6-5f17a39d4fde'
  eventHubsDataOwner: 'f526a384-b230-433a-b45c-95f59c4a2dec'
  monitoringMetricsPublisher: '3913510d-42f4-4e42-8a64-420c390055eb'
}
