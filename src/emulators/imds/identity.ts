/**
 * The identity of the emulated VM, served by `/metadata/instance`. Defaults describe an instance of
 * a uniform scale set; every value is a string, as IMDS serves them ('' when missing).
 */

export interface VmIdentity {
  /** VM name; for a uniform scale-set instance `{vmScaleSetName}_{instanceId}`. */
  name: string;
  computerName: string;
  vmId: string;
  resourceId: string;
  subscriptionId: string;
  resourceGroupName: string;
  location: string;
  zone: string;
  vmSize: string;
  osType: string;
  /** Regular or Spot (IMDS also uses Low for old low-priority scale sets). */
  priority: string;
  evictionPolicy: string;
  vmScaleSetName: string;
  /** Instance id inside the scale set; not an IMDS field, used to derive name and resourceId. */
  instanceId: string;
  platformFaultDomain: string;
  platformUpdateDomain: string;
  privateIpAddress: string;
  tags: Record<string, string>;
}

export type VmIdentityInput = Partial<VmIdentity>;

export const DEFAULT_SUBSCRIPTION_ID = '8c56d827-5f07-45ce-8f2b-6c5001db5c6f';
export const DEFAULT_RESOURCE_GROUP = 'rg-se-shipper-emulated';
export const DEFAULT_SCALE_SET = 'vmss-se-emulated';

/** Fills in a complete identity; names and ids left out are derived from the ones given. */
export function resolveIdentity(input: VmIdentityInput = {}): VmIdentity {
  // A name shaped like a uniform scale-set instance (`web_3`) implies its scale set, unless told otherwise.
  const vmScaleSetName =
    input.vmScaleSetName ??
    (input.name === undefined ? DEFAULT_SCALE_SET : (/^(.+)_\d+$/.exec(input.name)?.[1] ?? ''));
  const instanceId = input.instanceId ?? (vmScaleSetName === '' ? '' : (parseInstanceId(input.name) ?? '0'));
  const name = input.name ?? (vmScaleSetName === '' ? 'vm-se-emulated' : `${vmScaleSetName}_${instanceId}`);
  const subscriptionId = input.subscriptionId ?? DEFAULT_SUBSCRIPTION_ID;
  const resourceGroupName = input.resourceGroupName ?? DEFAULT_RESOURCE_GROUP;
  const resourceId =
    input.resourceId ??
    (vmScaleSetName === ''
      ? `/subscriptions/${subscriptionId}/resourceGroups/${resourceGroupName}/providers/Microsoft.Compute/virtualMachines/${name}`
      : `/subscriptions/${subscriptionId}/resourceGroups/${resourceGroupName}/providers/Microsoft.Compute/virtualMachineScaleSets/${vmScaleSetName}/virtualMachines/${instanceId}`);
  const computerName =
    input.computerName ??
    (vmScaleSetName === ''
      ? name
      : `${vmScaleSetName.slice(0, 9)}${Number(instanceId).toString(36).padStart(6, '0')}`);
  return {
    name,
    computerName,
    vmId: input.vmId ?? '4f6e6a43-9c3b-4a8e-9f0d-3a2b1c0d9e8f',
    resourceId,
    subscriptionId,
    resourceGroupName,
    location: input.location ?? 'westeurope',
    zone: input.zone ?? '1',
    vmSize: input.vmSize ?? 'Standard_D2s_v5',
    osType: input.osType ?? 'Linux',
    priority: input.priority ?? 'Regular',
    evictionPolicy: input.evictionPolicy ?? ((input.priority ?? 'Regular') === 'Spot' ? 'Deallocate' : ''),
    vmScaleSetName,
    instanceId,
    platformFaultDomain: input.platformFaultDomain ?? '0',
    platformUpdateDomain: input.platformUpdateDomain ?? '0',
    privateIpAddress: input.privateIpAddress ?? '10.0.0.4',
    tags: input.tags ?? { workload: 'se-shipper-emulated' },
  };
}

function parseInstanceId(name: string | undefined): string | undefined {
  if (name === undefined) return undefined;
  const match = /_(\d+)$/.exec(name);
  return match?.[1];
}

/** Name of another instance of the same scale set (or a sibling VM when there is no scale set). */
export function peerName(identity: VmIdentity, peer: string): string {
  if (identity.vmScaleSetName !== '') return `${identity.vmScaleSetName}_${peer}`;
  return `${identity.name}-peer${peer}`;
}

/** The `/metadata/instance` document (api-version 2021-02-01 shape, subset a shipper uses). */
export function instanceDocument(identity: VmIdentity): Record<string, unknown> {
  const tagsList = Object.entries(identity.tags).map(([name, value]) => ({ name, value }));
  return {
    compute: {
      azEnvironment: 'AzurePublicCloud',
      evictionPolicy: identity.evictionPolicy,
      isHostCompatibilityLayerVm: 'false',
      location: identity.location,
      name: identity.name,
      offer: '0001-com-ubuntu-server-jammy',
      osProfile: {
        adminUsername: 'azureuser',
        computerName: identity.computerName,
        disablePasswordAuthentication: 'true',
      },
      osType: identity.osType,
      placementGroupId: identity.vmScaleSetName === '' ? '' : '0b1f7a8e-2f1c-4d7e-9a51-5c3f0e4b6d21',
      platformFaultDomain: identity.platformFaultDomain,
      platformUpdateDomain: identity.platformUpdateDomain,
      priority: identity.priority,
      provider: 'Microsoft.Compute',
      publisher: 'canonical',
      resourceGroupName: identity.resourceGroupName,
      resourceId: identity.resourceId,
      sku: '22_04-lts-gen2',
      subscriptionId: identity.subscriptionId,
      tags: tagsList.map((t) => `${t.name}:${t.value}`).join(';'),
      tagsList,
      version: '22.04.202411010',
      vmId: identity.vmId,
      vmScaleSetName: identity.vmScaleSetName,
      vmSize: identity.vmSize,
      zone: identity.zone,
    },
    network: {
      interface: [
        {
          ipv4: {
            ipAddress: [{ privateIpAddress: identity.privateIpAddress, publicIpAddress: '' }],
            subnet: [{ address: '10.0.0.0', prefix: '24' }],
          },
          ipv6: { ipAddress: [] },
          macAddress: '6045BDA1B2C3',
        },
      ],
    },
  };
}
