// Event Hubs namespace (TLS 1.2, SAS/local auth off by default), one hub, one consumer group per reader.

@description('Namespace name, globally unique (6-50 chars: letters, digits, hyphens).')
@minLength(6)
@maxLength(50)
param namespaceName string

@description('Azure region.')
param location string

@description('Namespace tier. Standard is enough for any fleet size this tool targets; Premium for isolation.')
@allowed([
  'Standard'
  'Premium'
])
param skuName string = 'Standard'

@description('Throughput units (Standard) or processing units (Premium).')
@minValue(1)
@maxValue(40)
param capacity int = 1

@description('Disable SAS keys (local auth): only Microsoft Entra identities can send/receive. Keep true.')
param disableLocalAuth bool = true

@description('Public network access. Disabled requires a private endpoint reachable from the VMs (not created here).')
@allowed([
  'Enabled'
  'Disabled'
])
param publicNetworkAccess string = 'Enabled'

@description('Event hub name.')
param eventHubName string = 'scheduled-events'

@description('Partitions (the shipper uses vmId as partition key, so one VM stays in order).')
@minValue(1)
@maxValue(32)
param partitionCount int = 4

@description('Retention in hours. Standard allows up to 168 (7 days); Premium up to 2160.')
@minValue(1)
@maxValue(2160)
param retentionHours int = 168

@description('Consumer groups, one per reader (e.g. adx, azmon, your own apps).')
param consumerGroups string[] = [
  'adx'
  'azmon'
]

@description('Tags applied to every resource.')
param tags object = {}

resource namespace 'Microsoft.EventHub/namespaces@2024-01-01' = {
  name: namespaceName
  location: location
  tags: tags
  sku: {
    name: skuName
    tier: skuName
    capacity: capacity
  }
  properties: {
    minimumTlsVersion: '1.2'
    disableLocalAuth: disableLocalAuth
    publicNetworkAccess: publicNetworkAccess
    isAutoInflateEnabled: false
  }
}

resource hub 'Microsoft.EventHub/namespaces/eventhubs@2024-01-01' = {
  parent: namespace
  name: eventHubName
  properties: {
    partitionCount: partitionCount
    retentionDescription: {
      cleanupPolicy: 'Delete'
      retentionTimeInHours: retentionHours
    }
  }
}

resource readerGroups 'Microsoft.EventHub/namespaces/eventhubs/consumergroups@2024-01-01' = [
  for group in consumerGroups: {
    parent: hub
    name: group
    properties: {
      userMetadata: 'se-shipper reader ${group}'
    }
  }
]

output namespaceName string = namespace.name
output namespaceId string = namespace.id
@description('Host name the shipper connects to (--eventhubs-namespace), e.g. x.servicebus.windows.net.')
output namespaceFqdn string = split(split(namespace.properties.serviceBusEndpoint, '/')[2], ':')[0]
output eventHubName string = hub.name
output eventHubId string = hub.id
