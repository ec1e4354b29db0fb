// Log Analytics: workspace (new or existing), the SeShipper_CL custom table (columns generated from
// the record contract), a workbook, and, optionally, the Event Hubs -> Azure Monitor ingestion path.
//
// The ingestion path is the Data Collection Rule "dataImports.eventHub" data source, which is a
// PUBLIC PREVIEW feature and requires the workspace to be linked to a dedicated cluster or to use
// a commitment tier. It is therefore off unless enableEventHubIngestion is true. See docs/deploy.md.

@description('Workspace name.')
param workspaceName string

@description('Create the workspace (true) or use an existing one of that name in this resource group (false).')
param createWorkspace bool = true

@description('Azure region.')
param location string

@description('Workspace retention in days (new workspace only).')
@minValue(30)
@maxValue(730)
param retentionInDays int = 30

@description('Create the PREVIEW Event Hubs -> Log Analytics ingestion (DCE + DCR + association on the hub).')
param enableEventHubIngestion bool = false

@description('Deploy the se-shipper Azure Workbook (charts of the queries in infra/kql/loganalytics/queries).')
param deployWorkbook bool = true

@description('Event Hubs namespace name (same resource group).')
param namespaceName string

@description('Event hub name.')
param eventHubName string

@description('Consumer group reserved for Azure Monitor.')
param consumerGroup string = 'azmon'

@description('Tags.')
param tags object = {}

var tableName = 'SeShipper_CL'
var streamName = 'Custom-SeShipperEventHub'

resource namespace 'Microsoft.EventHub/namespaces@2024-01-01' existing = {
  name: namespaceName
}

resource hub 'Microsoft.EventHub/namespaces/eventhubs@2024-01-01' existing = {
  parent: namespace
  name: eventHubName
}

resource newWorkspace 'Microsoft.OperationalInsights/workspaces@2023-09-01' = if (createWorkspace) {
  name: workspaceName
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: retentionInDays
    features: {
      disableLocalAuth: true
    }
  }
}

// The workspace, whether created above or pre-existing (ordering: the table depends on newWorkspace).
resource workspace 'Microsoft.OperationalInsights/workspaces@2023-09-01' existing = {
  name: workspaceName
}

resource table 'Microsoft.OperationalInsights/workspaces/tables@2023-09-01' = {
  parent: workspace
  name: tableName
  properties: {
    plan: 'Analytics'
    schema: {
      name: tableName
      description: 'se-shipper records (schema v1), TimeGenerated = Event Hubs enqueued time.'
      // Generated from src/lifecycle/record.ts by test/infra/schema.ts; the test fails on drift.
      columns: loadJsonContent('../generated/loganalytics-columns.json')
    }
  }
  dependsOn: [
    newWorkspace
  ]
}

resource endpoint 'Microsoft.Insights/dataCollectionEndpoints@2023-03-11' = if (enableEventHubIngestion) {
  name: '${workspaceName}-se-shipper-dce'
  location: location
  tags: tags
  properties: {
    networkAcls: {
      publicNetworkAccess: 'Enabled'
    }
  }
}

resource rule 'Microsoft.Insights/dataCollectionRules@2023-03-11' = if (enableEventHubIngestion) {
  name: '${workspaceName}-se-shipper-dcr'
  location: location
  tags: tags
  identity: {
    type: 'SystemAssigned'
  }
  properties: {
    description: 'se-shipper: Event Hubs -> ${tableName} (public preview data source).'
    dataCollectionEndpointId: endpoint.id
    streamDeclarations: {
      '${streamName}': {
        columns: loadJsonContent('../generated/dcr-stream-columns.json')
      }
    }
    dataSources: {
      dataImports: {
        eventHub: {
          name: 'seShipperEventHub'
          consumerGroup: consumerGroup
          stream: streamName
        }
      }
    }
    destinations: {
      logAnalytics: [
        {
          name: 'workspace'
          workspaceResourceId: workspace.id
        }
      ]
    }
    dataFlows: [
      {
        streams: [
          streamName
        ]
        destinations: [
          'workspace'
        ]
        // Generated from the record contract; parses the JSON body into typed columns.
        transformKql: loadTextContent('../../kql/loganalytics/dcr-transform.kql')
        outputStream: 'Custom-${tableName}'
      }
    ]
  }
  dependsOn: [
    table
  ]
}

module receiver 'hub-role-assignment.bicep' = if (enableEventHubIngestion) {
  name: 'se-shipper-dcr-receiver-${uniqueString(workspaceName)}'
  params: {
    namespaceName: namespaceName
    eventHubName: eventHubName
    principalId: rule.identity.principalId
    role: 'Receiver'
  }
}

resource association 'Microsoft.Insights/dataCollectionRuleAssociations@2023-03-11' = if (enableEventHubIngestion) {
  name: 'se-shipper-dcra'
  scope: hub
  properties: {
    dataCollectionRuleId: rule.id
  }
  dependsOn: [
    receiver
  ]
}

resource workbook 'Microsoft.Insights/workbooks@2023-06-01' = if (deployWorkbook) {
  name: guid(workspace.id, 'se-shipper-workbook')
  location: location
  tags: tags
  kind: 'shared'
  properties: {
    displayName: 'se-shipper: Azure Scheduled Events'
    category: 'workbook'
    version: '1.0'
    sourceId: workspace.id
    // Generated from the Log Analytics query files by test/infra/workbook.ts; the test fails on drift.
    serializedData: loadTextContent('../../workbook/se-shipper.workbook.json')
  }
  dependsOn: [
    table
  ]
}

output workspaceId string = workspace.id
output tableName string = table.name
output dataCollectionRuleId string = enableEventHubIngestion ? rule.id : ''
