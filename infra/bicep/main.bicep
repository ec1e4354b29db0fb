// se-shipper sink side, one deployment:
//   az deployment group create -g <rg> -f infra/bicep/main.bicep -p alertEmails='["ops@example.com"]'
// See docs/deploy.md for what each module creates, costs and preview caveats.

targetScope = 'resourceGroup'

@description('Azure region for every resource (default: the resource group region).')
param location string = resourceGroup().location

@description('Short prefix for resource names (letters and digits, lowercase).')
@minLength(3)
@maxLength(11)
param prefix string = 'seship'

@description('Suffix making global names unique (default: derived from the resource group id).')
param uniqueSuffix string = substring(uniqueString(resourceGroup().id), 0, 8)

@description('Tags applied to every resource.')
param tags object = {
  app: 'scheduled-events-shipper'
}

// ---- Event Hubs ----
@description('Event Hubs tier: Standard (default) or Premium.')
@allowed([
  'Standard'
  'Premium'
])
param eventHubsSku string = 'Standard'

@description('Throughput units (Standard) or processing units (Premium).')
@minValue(1)
param eventHubsCapacity int = 1

@description('Disable SAS/local auth on the namespace (identities only). Keep true.')
param disableLocalAuth bool = true

@description('Public network access of the namespace. Disabled requires private endpoints you create.')
@allowed([
  'Enabled'
  'Disabled'
])
param eventHubsPublicNetworkAccess string = 'Enabled'

@description('Event hub name.')
param eventHubName string = 'scheduled-events'

@description('Hub partitions.')
@minValue(1)
@maxValue(32)
param partitionCount int = 4

@description('Hub retention in hours (Standard: at most 168).')
@minValue(1)
@maxValue(2160)
param retentionHours int = 168

@description('Extra consumer groups for your own readers (adx and azmon are added when those readers are deployed).')
param extraConsumerGroups string[] = []

@description('Object ids of extra readers (apps, users) granted Azure Event Hubs Data Receiver on the hub.')
param readerPrincipalIds string[] = []

// ---- ADX ----
@description('Deploy Azure Data Explorer (cluster, database, tables, data connection).')
param deployAdx bool = true

@description('ADX cluster SKU (default: Dev, no SLA, cheapest).')
param adxSkuName string = 'Dev(No SLA)_Standard_E2a_v4'

@description('ADX SKU tier: Basic for Dev SKUs, Standard otherwise.')
@allowed([
  'Basic'
  'Standard'
])
param adxSkuTier string = 'Basic'

@description('ADX instance count.')
@minValue(1)
param adxCapacity int = 1

@description('ADX database name.')
param adxDatabaseName string = 'scheduledevents'

// ---- Log Analytics + alerts ----
@description('Deploy a Log Analytics workspace with the SeShipper_CL table (and alerts, which query it).')
param deployLogAnalytics bool = false

@description('Workspace name (created unless useExistingWorkspace).')
param logAnalyticsWorkspaceName string = '${prefix}-law-${uniqueSuffix}'

@description('Use an existing workspace of that name in this resource group instead of creating one.')
param useExistingWorkspace bool = false

@description('PREVIEW: ingest from Event Hubs into SeShipper_CL with a Data Collection Rule (needs a dedicated cluster or commitment tier on the workspace).')
param enableLogAnalyticsEventHubIngestion bool = false

@description('Deploy the action group and alert rules (needs deployLogAnalytics).')
param deployAlerts bool = true

@description('E-mail addresses the action group notifies.')
param alertEmails string[] = []

@description('Webhook URL (common alert schema) the action group calls. Empty: none.')
@secure()
param alertWebhookUrl string = ''

@description('Shipper heartbeat interval in seconds (se-shipper --heartbeat-interval).')
@minValue(10)
param heartbeatIntervalSeconds int = 300

// ---- Shipper on VMs / scale sets of this resource group ----
@description('Existing Linux VMs in this resource group to install the shipper on (identity must be attached, see docs).')
param shipperVmNames string[] = []

@description('Existing Linux scale sets in this resource group to install the shipper on.')
param shipperVmssNames string[] = []

@description('npm package spec of the shipper the VMs install.')
param shipperPackage string = 'scheduled-events-shipper@0.1.0'

@description('Alternative: https URL (SAS allowed) of a self-contained bundle from deploy/make-bundle.sh.')
@secure()
param shipperBundleUrl string = ''

var namespaceName = '${prefix}-ehns-${uniqueSuffix}'
var adxClusterName = toLower(take('${prefix}adx${uniqueSuffix}', 22))
var consumerGroups = union(deployAdx ? ['adx'] : [], deployLogAnalytics ? ['azmon'] : [], extraConsumerGroups)

module eventHubs 'modules/eventhubs.bicep' = {
  name: 'se-shipper-eventhubs'
  params: {
    namespaceName: namespaceName
    location: location
    skuName: eventHubsSku
    capacity: eventHubsCapacity
    disableLocalAuth: disableLocalAuth
    publicNetworkAccess: eventHubsPublicNetworkAccess
    eventHubName: eventHubName
    partitionCount: partitionCount
    retentionHours: retentionHours
    consumerGroups: consumerGroups
    tags: tags
  }
}

module identity 'modules/identity.bicep' = {
  name: 'se-shipper-identity'
  params: {
    identityName: '${prefix}-shipper-id'
    location: location
    namespaceName: eventHubs.outputs.namespaceName
    eventHubName: eventHubs.outputs.eventHubName
    tags: tags
  }
}

module readers 'modules/hub-role-assignment.bicep' = [
  for (principalId, i) in readerPrincipalIds: {
    name: 'se-shipper-reader-${i}'
    params: {
      namespaceName: eventHubs.outputs.namespaceName
      eventHubName: eventHubs.outputs.eventHubName
      principalId: principalId
      role: 'Receiver'
    }
  }
]

module adx 'modules/adx.bicep' = if (deployAdx) {
  name: 'se-shipper-adx'
  params: {
    clusterName: adxClusterName
    location: location
    skuName: adxSkuName
    skuTier: adxSkuTier
    skuCapacity: adxCapacity
    databaseName: adxDatabaseName
    namespaceName: eventHubs.outputs.namespaceName
    eventHubName: eventHubs.outputs.eventHubName
    consumerGroup: 'adx'
    tags: tags
  }
}

module logAnalytics 'modules/loganalytics.bicep' = if (deployLogAnalytics) {
  name: 'se-shipper-loganalytics'
  params: {
    workspaceName: logAnalyticsWorkspaceName
    createWorkspace: !useExistingWorkspace
    location: location
    enableEventHubIngestion: enableLogAnalyticsEventHubIngestion
    namespaceName: eventHubs.outputs.namespaceName
    eventHubName: eventHubs.outputs.eventHubName
    consumerGroup: 'azmon'
    tags: tags
  }
}

module alerts 'modules/alerts.bicep' = if (deployLogAnalytics && deployAlerts) {
  name: 'se-shipper-alerts'
  params: {
    location: location
    workspaceId: logAnalytics!.outputs.workspaceId
    alertEmails: alertEmails
    alertWebhookUrl: alertWebhookUrl
    heartbeatIntervalSeconds: heartbeatIntervalSeconds
    tags: tags
  }
}

module shipperVms 'modules/shipper-vm.bicep' = [
  for vmName in shipperVmNames: {
    name: 'se-shipper-vm-${vmName}'
    params: {
      vmName: vmName
      eventHubsNamespaceFqdn: eventHubs.outputs.namespaceFqdn
      eventHubName: eventHubs.outputs.eventHubName
      identityClientId: identity.outputs.clientId
      shipperPackage: shipperPackage
      shipperBundleUrl: shipperBundleUrl
    }
  }
]

module shipperScaleSets 'modules/shipper-vmss.bicep' = [
  for vmssName in shipperVmssNames: {
    name: 'se-shipper-vmss-${vmssName}'
    params: {
      vmssName: vmssName
      eventHubsNamespaceFqdn: eventHubs.outputs.namespaceFqdn
      eventHubName: eventHubs.outputs.eventHubName
      identityClientId: identity.outputs.clientId
      shipperPackage: shipperPackage
      shipperBundleUrl: shipperBundleUrl
    }
  }
]

@description('--eventhubs-namespace for the shipper.')
output eventHubsNamespaceFqdn string = eventHubs.outputs.namespaceFqdn
@description('--eventhub for the shipper.')
output eventHubName string = eventHubs.outputs.eventHubName
@description('--managed-identity-client-id for the shipper.')
output identityClientId string = identity.outputs.clientId
@description('Resource id of the shipper identity (attach it to VMs / scale sets).')
output identityResourceId string = identity.outputs.identityId
@description('ADX cluster URI (empty when deployAdx is false).')
output adxClusterUri string = deployAdx ? adx!.outputs.clusterUri : ''
@description('ADX database name (empty when deployAdx is false).')
output adxDatabase string = deployAdx ? adx!.outputs.databaseName : ''
@description('Log Analytics workspace resource id (empty when deployLogAnalytics is false).')
output logAnalyticsWorkspaceId string = deployLogAnalytics ? logAnalytics!.outputs.workspaceId : ''
@description('Action group resource id (empty when alerts are not deployed).')
output actionGroupId string = deployLogAnalytics && deployAlerts ? alerts!.outputs.actionGroupId : ''
