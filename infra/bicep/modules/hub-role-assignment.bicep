// One role assignment scoped to ONE event hub (not the namespace, not the resource group).

import { builtInRoleIds } from 'roles.bicep'

@description('Event Hubs namespace name (same resource group as this deployment).')
param namespaceName string

@description('Event hub name inside the namespace.')
param eventHubName string

@description('Object (principal) id that receives the role.')
param principalId string

@description('Which data-plane role: Sender for shippers, Receiver for readers (ADX, Azure Monitor, apps).')
@allowed([
  'Sender'
  'Receiver'
])
param role string

@description('Principal type; ServicePrincipal for managed identities (avoids replication-delay failures).')
@allowed([
  'ServicePrincipal'
  'User'
  'Group'
])
param principalType string = 'ServicePrincipal'

var roleId = role == 'Sender' ? builtInRoleIds.eventHubsDataSender : builtInRoleIds.eventHubsDataReceiver

resource namespace 'Microsoft.EventHub/namespaces@2024-01-01' existing = {
  name: namespaceName
}

resource hub 'Microsoft.EventHub/namespaces/eventhubs@2024-01-01' existing = {
  parent: namespace
  name: eventHubName
}

resource assignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(hub.id, principalId, roleId)
  scope: hub
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)
    principalId: principalId
    principalType: principalType
    description: 'se-shipper: Azure Event Hubs Data ${role} on hub ${eventHubName}'
  }
}

output roleAssignmentId string = assignment.id
