// Azure Data Explorer: cluster (system-assigned identity), database, the database script that
// creates the raw table + JSON mapping + typed table + update policy + dedup materialized view
// (infra/kql/adx/setup.kql, generated from the record contract), and the Event Hubs data
// connection authenticated with the cluster's identity (Data Receiver on the hub only).

@description('Cluster name: 4-22 lowercase letters and digits, globally unique.')
@minLength(4)
@maxLength(22)
param clusterName string

@description('Azure region.')
param location string

@description('Cluster SKU. The Dev SKU has no SLA and one node: fine for trials and small fleets.')
param skuName string = 'Dev(No SLA)_Standard_E2a_v4'

@description('SKU tier: Basic for Dev SKUs, Standard otherwise.')
@allowed([
  'Basic'
  'Standard'
])
param skuTier string = 'Basic'

@description('Instance count (1 for Dev SKUs, 2+ for Standard).')
@minValue(1)
param skuCapacity int = 1

@description('Stop the cluster automatically after days without queries or ingestion (saves cost on trials).')
param enableAutoStop bool = false

@description('Database name.')
param databaseName string = 'scheduledevents'

@description('How long records are kept (ISO 8601 duration).')
param softDeletePeriod string = 'P365D'

@description('How long records are kept in hot cache (ISO 8601 duration).')
param hotCachePeriod string = 'P31D'

@description('Event Hubs namespace name (same resource group).')
param namespaceName string

@description('Event hub name.')
param eventHubName string

@description('Consumer group reserved for ADX.')
param consumerGroup string = 'adx'

@description('Tags.')
param tags object = {}

// Generated from src/lifecycle/record.ts by test/infra/schema.ts; the test fails on drift.
var setupScript = loadTextContent('../../kql/adx/setup.kql')
var rawTableName = 'SeShipperRaw'
var rawMappingName = 'SeShipperRawMapping'

resource namespace 'Microsoft.EventHub/namespaces@2024-01-01' existing = {
  name: namespaceName
}

resource hub 'Microsoft.EventHub/namespaces/eventhubs@2024-01-01' existing = {
  parent: namespace
  name: eventHubName
}

resource cluster 'Microsoft.Kusto/clusters@2024-04-13' = {
  name: clusterName
  location: location
  tags: tags
  sku: {
    name: skuName
    tier: skuTier
    capacity: skuCapacity
  }
  identity: {
    type: 'SystemAssigned'
  }
  properties: {
    enableAutoStop: enableAutoStop
    enableStreamingIngest: false
    enablePurge: false
    publicNetworkAccess: 'Enabled'
  }
}

resource database 'Microsoft.Kusto/clusters/databases@2024-04-13' = {
  parent: cluster
  name: databaseName
  location: location
  kind: 'ReadWrite'
  properties: {
    softDeletePeriod: softDeletePeriod
    hotCachePeriod: hotCachePeriod
  }
}

resource setup 'Microsoft.Kusto/clusters/databases/scripts@2024-04-13' = {
  parent: database
  name: 'se-shipper-setup'
  properties: {
    scriptContent: setupScript
    continueOnErrors: false
    // Rerun whenever the script changes (every command in it is idempotent).
    forceUpdateTag: uniqueString(setupScript)
  }
}

module receiver 'hub-role-assignment.bicep' = {
  name: 'se-shipper-adx-receiver-${uniqueString(cluster.id)}'
  params: {
    namespaceName: namespaceName
    eventHubName: eventHubName
    principalId: cluster.identity.principalId
    role: 'Receiver'
  }
}

resource connection 'Microsoft.Kusto/clusters/databases/dataConnections@2024-04-13' = {
  parent: database
  name: 'se-shipper-eventhub'
  location: location
  kind: 'EventHub'
  properties: {
    eventHubResourceId: hub.id
    consumerGroup: consumerGroup
    tableName: rawTableName
    mappingRuleName: rawMappingName
    // One record per message (the record contract), so JSON; system properties are embedded per message.
    dataFormat: 'JSON'
    compression: 'None'
    eventSystemProperties: [
      'x-opt-enqueued-time'
    ]
    managedIdentityResourceId: cluster.id
    databaseRouting: 'Single'
  }
  dependsOn: [
    setup
    receiver
  ]
}

output clusterUri string = cluster.properties.uri
output clusterId string = cluster.id
output databaseName string = database.name
output principalId string = cluster.identity.principalId
