// The shipper's user-assigned managed identity, allowed to SEND to the one hub and nothing else.

@description('Identity name.')
param identityName string

@description('Azure region.')
param location string

@description('Event Hubs namespace name (same resource group).')
param namespaceName string

@description('Event hub name.')
param eventHubName string

@description('Tags.')
param tags object = {}

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: identityName
  location: location
  tags: tags
}

module sender 'hub-role-assignment.bicep' = {
  name: 'se-shipper-sender-${uniqueString(identity.id)}'
  params: {
    namespaceName: namespaceName
    eventHubName: eventHubName
    principalId: identity.properties.principalId
    role: 'Sender'
  }
}

output identityId string = identity.id
output clientId string = identity.properties.clientId
output principalId string = identity.properties.principalId
