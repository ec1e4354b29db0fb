// Action group + log search alert rules over the Log Analytics table SeShipper_CL:
//  1. Terminate or Preempt scheduled (or started) on a VM: page before the VM goes away.
//  2. A shipper stopped sending heartbeats (VM down, shipper down, or egress blocked).
//  3. An event started without a preceding Scheduled record (unannounced: hardware failure).
// Every query here is parsed and bound offline against the generated table schema by
// test/infra/kql.test.ts ({0} placeholders are filled in with format()).

@description('Azure region of the alert rules (usually the workspace region).')
param location string

@description('Resource id of the Log Analytics workspace holding SeShipper_CL.')
param workspaceId string

@description('Action group name.')
param actionGroupName string = 'se-shipper-alerts'

@description('Action group short name (at most 12 characters, shown in SMS/e-mail).')
@maxLength(12)
param actionGroupShortName string = 'se-shipper'

@description('E-mail addresses to notify.')
param alertEmails string[] = []

@description('Optional webhook (common alert schema) to notify, e.g. an incident tool. Empty: none.')
@secure()
param alertWebhookUrl string = ''

@description('Heartbeat interval of the shippers in seconds (se-shipper --heartbeat-interval, default 300).')
@minValue(10)
param heartbeatIntervalSeconds int = 300

@description('A shipper is silent after this many missed heartbeat intervals.')
@minValue(2)
param silentAfterIntervals int = 3

@description('Severity of the Terminate/Preempt alert (0 = critical .. 4 = verbose).')
@minValue(0)
@maxValue(4)
param evictionSeverity int = 1

@description('Tags.')
param tags object = {}

var silentAfterMinutes = max(1, (heartbeatIntervalSeconds * silentAfterIntervals + 59) / 60)

var evictionQuery = '''
SeShipper_CL
| where recordType == "lifecycle"
| where eventType in ("Terminate", "Preempt")
| where phase in ("Scheduled", "Rescheduled", "Started")
| where isnull(affectsThisVm) or affectsThisVm
| summarize firstSeen = min(observedAt), notBefore = max(notBefore) by vmName, vmResourceId, eventType, eventId
'''

var silentShipperQuery = format('''
let heartbeats = SeShipper_CL
    | where recordType == "heartbeat"
    | summarize lastHeartbeat = max(observedAt) by vmId, vmName, vmResourceId;
let gone = SeShipper_CL
    | where recordType == "lifecycle"
    | where eventType in ("Terminate", "Preempt") and phase in ("Started", "Completed")
    | distinct vmId;
heartbeats
| where lastHeartbeat < ago({0}m)
| join kind=leftanti gone on vmId
| project vmName, vmResourceId, lastHeartbeat
''', silentAfterMinutes)

var unannouncedQuery = '''
let scheduled = SeShipper_CL
    | where recordType == "lifecycle" and phase in ("Scheduled", "Rescheduled")
    | distinct vmId, eventKey = tolower(eventId);
SeShipper_CL
| where recordType == "lifecycle" and phase == "Started"
| where TimeGenerated > ago(30m)
| extend eventKey = tolower(eventId)
| join kind=leftanti scheduled on vmId, eventKey
| summarize startedAt = min(observedAt) by vmName, vmResourceId, eventType, eventId
'''

var rules = [
  {
    name: 'se-shipper-terminate-preempt'
    displayName: 'se-shipper: Terminate or Preempt scheduled on a VM'
    description: 'A Terminate (scale-in, delete) or Preempt (Spot eviction) event is scheduled or running on a VM.'
    severity: evictionSeverity
    frequency: 'PT1M'
    window: 'PT15M'
    query: evictionQuery
    dimensions: [
      'vmName'
      'eventType'
      'eventId'
    ]
  }
  {
    name: 'se-shipper-silent-shipper'
    displayName: 'se-shipper: shipper heartbeats stopped'
    description: 'No heartbeat from a shipper for ${silentAfterIntervals} heartbeat intervals (VM or shipper down, or Event Hubs unreachable).'
    severity: 2
    frequency: 'PT5M'
    window: 'P1D'
    query: silentShipperQuery
    dimensions: [
      'vmName'
    ]
  }
  {
    name: 'se-shipper-unannounced-start'
    displayName: 'se-shipper: maintenance started without notice'
    description: 'An event was seen Started without a preceding Scheduled record (hardware failure, or the shipper was down).'
    severity: 2
    frequency: 'PT5M'
    window: 'P1D'
    query: unannouncedQuery
    dimensions: [
      'vmName'
      'eventType'
    ]
  }
]

var emailReceivers = [
  for (email, i) in alertEmails: {
    name: 'email-${i}'
    emailAddress: email
    useCommonAlertSchema: true
  }
]

var webhookReceivers = empty(alertWebhookUrl)
  ? []
  : [
      {
        name: 'webhook'
        serviceUri: alertWebhookUrl
        useCommonAlertSchema: true
      }
    ]

resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = {
  name: actionGroupName
  location: 'global'
  tags: tags
  properties: {
    groupShortName: actionGroupShortName
    enabled: true
    emailReceivers: emailReceivers
    webhookReceivers: webhookReceivers
  }
}

resource alertRules 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = [
  for rule in rules: {
    name: rule.name
    location: location
    tags: tags
    kind: 'LogAlert'
    properties: {
      displayName: rule.displayName
      description: rule.description
      severity: rule.severity
      enabled: true
      evaluationFrequency: rule.frequency
      windowSize: rule.window
      scopes: [
        workspaceId
      ]
      criteria: {
        allOf: [
          {
            query: rule.query
            timeAggregation: 'Count'
            operator: 'GreaterThan'
            threshold: 0
            dimensions: [
              for d in rule.dimensions: {
                name: d
                operator: 'Include'
                values: [
                  '*'
                ]
              }
            ]
            failingPeriods: {
              numberOfEvaluationPeriods: 1
              minFailingPeriodsToAlert: 1
            }
          }
        ]
      }
      autoMitigate: true
      // The table may be created in the same deployment, before it has any data.
      skipQueryValidation: true
      actions: {
        actionGroups: [
          actionGroup.id
        ]
      }
    }
  }
]

output actionGroupId string = actionGroup.id
output alertRuleIds string[] = [for (rule, i) in rules: alertRules[i].id]
