// Installs se-shipper on an EXISTING Linux VM with the Custom Script extension (deploy/install.sh).
// Prerequisite: the shipper identity is attached to the VM (az vm identity assign, docs/deploy.md).

@description('Name of the existing VM (this resource group).')
param vmName string

@description('Event Hubs namespace host name, e.g. contoso-se.servicebus.windows.net.')
param eventHubsNamespaceFqdn string

@description('Event hub name.')
param eventHubName string

@description('Client id of the user-assigned identity attached to the VM.')
param identityClientId string

@description('npm package spec the VM installs with npm (registry name@version or https URL of an npm pack tarball).')
param shipperPackage string = 'scheduled-events-shipper@0.1.0'

@description('Alternative to shipperPackage: https URL (SAS allowed) of a self-contained bundle from deploy/make-bundle.sh. No npm registry access needed.')
@secure()
param shipperBundleUrl string = ''

@description('Node.js runtime: auto (an installed node >= 20.19, else the pinned official nodejs.org tarball, checksum-verified, private to the shipper), nodejs.org (always the private pinned runtime) or distro (the distribution package; must be >= 20.19).')
@allowed([
  'auto'
  'nodejs.org'
  'distro'
])
param nodeSource string = 'auto'

@description('Where the Node.js tarballs are downloaded from (nodejs.org or a mirror with the same layout, e.g. a blob container).')
param nodeDistUrl string = 'https://nodejs.org/dist'

@description('Change to rerun the script on the next deployment (e.g. utcNow()).')
param forceUpdateTag string = ''

// The extension runs protectedSettings.script with /bin/sh, so the payload is a POSIX sh wrapper:
// it decodes deploy/install.sh (a bash script) to a temporary file and runs it with bash and the
// arguments below (values single-quoted).
var packageArg = empty(shipperBundleUrl) ? '--package \'${shipperPackage}\'' : '--bundle \'${shipperBundleUrl}\''
var installArgs = '--eventhubs-namespace \'${eventHubsNamespaceFqdn}\' --eventhub \'${eventHubName}\' --client-id \'${identityClientId}\' --node \'${nodeSource}\' --node-dist-url \'${nodeDistUrl}\' ${packageArg}'
var installScript = '#!/bin/sh\nf="$(mktemp)" || exit 1\necho \'${loadFileAsBase64('../../../deploy/install.sh')}\' | base64 -d > "$f" || exit 1\n/bin/bash "$f" ${installArgs}\nrc=$?\nrm -f "$f"\nexit $rc\n'

resource vm 'Microsoft.Compute/virtualMachines@2024-11-01' existing = {
  name: vmName
}

resource shipper 'Microsoft.Compute/virtualMachines/extensions@2024-11-01' = {
  parent: vm
  name: 'se-shipper'
  location: vm.location
  properties: {
    publisher: 'Microsoft.Azure.Extensions'
    type: 'CustomScript'
    typeHandlerVersion: '2.1'
    autoUpgradeMinorVersion: true
    forceUpdateTag: forceUpdateTag
    settings: {}
    protectedSettings: {
      script: base64(installScript)
    }
  }
}

output extensionId string = shipper.id
