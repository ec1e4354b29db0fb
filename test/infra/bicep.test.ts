/**
 * Offline checks of infra/bicep with the tree-sitter-bicep grammar: syntax, allowed
 * `type@apiVersion` pairs, security properties, role ids, role scopes, and the wiring between the
 * Bicep and the generated KQL/JSON files. When a `bicep` binary is on PATH, `bicep build` and
 * `bicep lint` run too (the GitHub workflow .github/workflows/infra.yml does that).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { Node } from 'web-tree-sitter';
import {
  allStrings,
  declarations,
  listBicepFiles,
  literal,
  type ParsedBicep,
  parseBicep,
  prop,
  type ResourceDecl,
  resources,
  stringValue,
  syntaxProblems,
} from './bicep.js';
import { names } from './schema.js';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const bicepDir = join(repo, 'infra', 'bicep');
const files = listBicepFiles(bicepDir);
const parsed = new Map<string, ParsedBicep>();
async function get(rel: string): Promise<ParsedBicep> {
  const abs = join(bicepDir, rel);
  let p = parsed.get(abs);
  if (!p) {
    p = await parseBicep(abs);
    parsed.set(abs, p);
  }
  return p;
}
const name = (abs: string) => relative(bicepDir, abs);

/** The documented built-in role ids (docs/deploy.md; Microsoft's built-in roles reference). */
const DOCUMENTED_ROLE_IDS = {
  eventHubsDataSender: '2b629674-e913-4c01-ae53-ef4638d8f975',
  eventHubsDataReceiver: 'a638d3c7-ab3a-418d-83e6-5f17a39d4fde',
  eventHubsDataOwner: 'f526a384-b230-433a-b45c-95f59c4a2dec',
  monitoringMetricsPublisher: '3913510d-42f4-4e42-8a64-420c390055eb',
};

/** Resource types and the API versions this project has checked the properties of. */
const ALLOWED_API_VERSIONS: Record<string, string[]> = {
  'Microsoft.EventHub/namespaces': ['2024-01-01'],
  'Microsoft.EventHub/namespaces/eventhubs': ['2024-01-01'],
  'Microsoft.EventHub/namespaces/eventhubs/consumergroups': ['2024-01-01'],
  'Microsoft.ManagedIdentity/userAssignedIdentities': ['2023-01-31'],
  'Microsoft.Authorization/roleAssignments': ['2022-04-01'],
  'Microsoft.Kusto/clusters': ['2024-04-13'],
  'Microsoft.Kusto/clusters/databases': ['2024-04-13'],
  'Microsoft.Kusto/clusters/databases/scripts': ['2024-04-13'],
  'Microsoft.Kusto/clusters/databases/dataConnections': ['2024-04-13'],
  'Microsoft.OperationalInsights/workspaces': ['2023-09-01'],
  'Microsoft.OperationalInsights/workspaces/tables': ['2023-09-01'],
  'Microsoft.Insights/dataCollectionEndpoints': ['2023-03-11'],
  'Microsoft.Insights/dataCollectionRules': ['2023-03-11'],
  'Microsoft.Insights/dataCollectionRuleAssociations': ['2023-03-11'],
  'Microsoft.Insights/actionGroups': ['2023-01-01'],
  'Microsoft.Insights/scheduledQueryRules': ['2023-12-01'],
  'Microsoft.Insights/workbooks': ['2023-06-01'],
  'Microsoft.Compute/virtualMachines': ['2024-11-01'],
  'Microsoft.Compute/virtualMachines/extensions': ['2024-11-01'],
  'Microsoft.Compute/virtualMachineScaleSets': ['2024-11-01'],
  'Microsoft.Compute/virtualMachineScaleSets/extensions': ['2024-11-01'],
};

async function allResources(): Promise<(ResourceDecl & { file: string })[]> {
  const out: (ResourceDecl & { file: string })[] = [];
  for (const f of files) for (const r of resources(await get(name(f)))) out.push({ ...r, file: name(f) });
  return out;
}

async function resource(file: string, type: string): Promise<ResourceDecl> {
  const r = resources(await get(file)).find((x) => x.type === type && !x.existing);
  if (!r) throw new Error(`${file} declares no ${type}`);
  return r;
}

const text = (n: Node | undefined) => n?.text;
const str = (n: Node | undefined) => (n ? stringValue(n) : undefined);

describe('Bicep syntax', () => {
  it('finds the expected files', () => {
    expect(files.map(name)).toEqual(
      expect.arrayContaining([
        'main.bicep',
        'modules/eventhubs.bicep',
        'modules/identity.bicep',
        'modules/hub-role-assignment.bicep',
        'modules/roles.bicep',
        'modules/adx.bicep',
        'modules/loganalytics.bicep',
        'modules/alerts.bicep',
        'modules/shipper-vm.bicep',
        'modules/shipper-vmss.bicep',
        'modules/scheduled-events-profile.bicep',
      ]),
    );
  });
  for (const f of files) {
    it(`${name(f)} parses without ERROR or MISSING nodes`, async () => {
      expect(syntaxProblems(await get(name(f)))).toEqual([]);
    });
  }
  it('the checker is live: a broken file reports problems', async () => {
    const { bicepParser } = await import('./bicep.js');
    const tree = (await bicepParser()).parse("resource x 'A/b@2020-01-01' = {\n  name: 'x'\n");
    expect(tree?.rootNode.hasError).toBe(true);
  });
});

describe('resource types and API versions', () => {
  it('every type@apiVersion is in the allowed list', async () => {
    const all = await allResources();
    expect(all.length).toBeGreaterThan(20);
    for (const r of all) {
      expect(ALLOWED_API_VERSIONS[r.type], `${r.file}:${r.line} ${r.type}`).toBeDefined();
      expect(ALLOWED_API_VERSIONS[r.type], `${r.file}:${r.line} ${r.type}@${r.apiVersion}`).toContain(
        r.apiVersion,
      );
    }
  });

  it('modules referenced from main.bicep and loaded files exist', async () => {
    const checked: string[] = [];
    for (const f of files) {
      const b = await get(name(f));
      for (const s of allStrings(b)) {
        const v = stringValue(s);
        const parent = s.parent;
        const fn = parent?.parent?.childForFieldName('function')?.text;
        const isModulePath = parent?.type === 'module_declaration';
        const isLoad =
          parent?.type === 'arguments' && /^load(TextContent|JsonContent|FileAsBase64)$/.test(fn ?? '');
        if (v && (isModulePath || isLoad)) {
          expect(existsSync(resolve(dirname(f), v)), `${name(f)} -> ${v}`).toBe(true);
          checked.push(v);
        }
      }
    }
    expect(checked).toEqual(
      expect.arrayContaining([
        'modules/adx.bicep',
        'hub-role-assignment.bicep',
        '../../kql/adx/setup.kql',
        '../generated/loganalytics-columns.json',
        '../../../deploy/install.sh',
      ]),
    );
  });
});

describe('security properties', () => {
  it('Event Hubs: TLS 1.2 minimum, local (SAS) auth off by default everywhere, Standard by default', async () => {
    const ns = await resource('modules/eventhubs.bicep', 'Microsoft.EventHub/namespaces');
    expect(str(prop(ns.body, 'properties.minimumTlsVersion'))).toBe('1.2');
    expect(text(prop(ns.body, 'properties.disableLocalAuth'))).toBe('disableLocalAuth');
    for (const f of ['modules/eventhubs.bicep', 'main.bicep']) {
      const params = declarations(await get(f), 'parameter_declaration');
      expect(text(params.get('disableLocalAuth')), f).toBe('true');
    }
    const eh = declarations(await get('modules/eventhubs.bicep'), 'parameter_declaration');
    expect(str(eh.get('skuName'))).toBe('Standard');
    expect(str(declarations(await get('main.bicep'), 'parameter_declaration').get('eventHubsSku'))).toBe(
      'Standard',
    );
  });

  it('role ids are named constants equal to the documented built-in ids, and appear nowhere else', async () => {
    const roles = declarations(await get('modules/roles.bicep'), 'variable_declaration');
    expect(literal(roles.get('builtInRoleIds'))).toEqual(DOCUMENTED_ROLE_IDS);
    const guid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;
    for (const f of files.filter((x) => name(x) !== 'modules/roles.bicep')) {
      for (const s of allStrings(await get(name(f)))) expect(s.text, name(f)).not.toMatch(guid);
    }
  });

  it('role assignments exist only in hub-role-assignment.bicep, scoped to the hub, with the right role per kind', async () => {
    const all = await allResources();
    const ras = all.filter((r) => r.type === 'Microsoft.Authorization/roleAssignments');
    expect(ras.map((r) => r.file)).toEqual(['modules/hub-role-assignment.bicep']);
    const b = await get('modules/hub-role-assignment.bicep');
    const ra = ras[0];
    expect(text(prop(ra?.body, 'scope'))).toBe('hub');
    const hub = resources(b).find((r) => r.symbol === 'hub');
    expect(hub?.type).toBe('Microsoft.EventHub/namespaces/eventhubs');
    expect(text(prop(ra?.body, 'name'))).toBe('guid(hub.id, principalId, roleId)');
    expect(text(prop(ra?.body, 'properties.roleDefinitionId'))).toBe(
      "subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)",
    );
    expect(text(prop(ra?.body, 'properties.principalType'))).toBe('principalType');
    expect(str(declarations(b, 'parameter_declaration').get('principalType'))).toBe('ServicePrincipal');
    const vars = declarations(b, 'variable_declaration');
    expect(text(vars.get('roleId'))).toBe(
      "role == 'Sender' ? builtInRoleIds.eventHubsDataSender : builtInRoleIds.eventHubsDataReceiver",
    );
    expect(b.text).toContain("import { builtInRoleIds } from 'roles.bicep'");
  });

  it('the shipper identity is a Sender on the hub only; readers (ADX, DCR, extra) are Receivers', async () => {
    const roleOf = async (file: string) => {
      const b = await get(file);
      const out: string[] = [];
      for (const n of b.root.namedChildren) {
        if (n?.type !== 'module_declaration') continue;
        const path = str(n.namedChildren[1] ?? undefined);
        if (path !== 'hub-role-assignment.bicep' && path !== 'modules/hub-role-assignment.bicep') continue;
        const body = n.descendantsOfType('object')[0] ?? undefined;
        out.push(String(str(prop(body, 'params.role'))));
      }
      return out;
    };
    expect(await roleOf('modules/identity.bicep')).toEqual(['Sender']);
    expect(await roleOf('modules/adx.bicep')).toEqual(['Receiver']);
    expect(await roleOf('modules/loganalytics.bicep')).toEqual(['Receiver']);
    expect(await roleOf('main.bicep')).toEqual(['Receiver']);
  });

  it('no SAS keys or connection strings are read or output anywhere', async () => {
    for (const f of files) {
      const t = (await get(name(f))).text;
      expect(t, name(f)).not.toMatch(/listKeys|listConnectionStrings|authorizationRules|primaryKey/);
    }
  });

  it('Log Analytics workspace disables local auth; the DCR path is opt-in', async () => {
    const ws = await resource('modules/loganalytics.bicep', 'Microsoft.OperationalInsights/workspaces');
    expect(text(prop(ws.body, 'properties.features.disableLocalAuth'))).toBe('true');
    const la = declarations(await get('modules/loganalytics.bicep'), 'parameter_declaration');
    expect(text(la.get('enableEventHubIngestion'))).toBe('false');
    const main = declarations(await get('main.bicep'), 'parameter_declaration');
    expect(text(main.get('deployLogAnalytics'))).toBe('false');
    expect(text(main.get('enableLogAnalyticsEventHubIngestion'))).toBe('false');
    expect(text(main.get('deployAdx'))).toBe('true');
  });
});

describe('wiring', () => {
  it('ADX: script from the generated setup.kql, data connection on the raw table + mapping with the cluster identity', async () => {
    const b = await get('modules/adx.bicep');
    const vars = declarations(b, 'variable_declaration');
    expect(text(vars.get('setupScript'))).toBe("loadTextContent('../../kql/adx/setup.kql')");
    expect(str(vars.get('rawTableName'))).toBe(names.adxRawTable);
    expect(str(vars.get('rawMappingName'))).toBe(names.adxMapping);
    const cluster = await resource('modules/adx.bicep', 'Microsoft.Kusto/clusters');
    expect(str(prop(cluster.body, 'identity.type'))).toBe('SystemAssigned');
    const script = await resource('modules/adx.bicep', 'Microsoft.Kusto/clusters/databases/scripts');
    expect(text(prop(script.body, 'properties.scriptContent'))).toBe('setupScript');
    expect(text(prop(script.body, 'properties.continueOnErrors'))).toBe('false');
    expect(text(prop(script.body, 'properties.forceUpdateTag'))).toBe('uniqueString(setupScript)');
    const dc = await resource('modules/adx.bicep', 'Microsoft.Kusto/clusters/databases/dataConnections');
    expect(str(prop(dc.body, 'kind'))).toBe('EventHub');
    expect(text(prop(dc.body, 'properties.tableName'))).toBe('rawTableName');
    expect(text(prop(dc.body, 'properties.mappingRuleName'))).toBe('rawMappingName');
    expect(text(prop(dc.body, 'properties.managedIdentityResourceId'))).toBe('cluster.id');
    expect(text(prop(dc.body, 'properties.eventHubResourceId'))).toBe('hub.id');
    expect(literal(prop(dc.body, 'properties.eventSystemProperties'))).toEqual(['x-opt-enqueued-time']);
    expect(str(prop(dc.body, 'properties.dataFormat'))).toBe('JSON');
    expect(literal(prop(dc.body, 'dependsOn'))).toBeDefined();
    expect(text(prop(dc.body, 'dependsOn'))?.replace(/\s+/g, ' ')).toBe('[ setup receiver ]');
    const params = declarations(b, 'parameter_declaration');
    expect(str(params.get('skuName'))).toMatch(/^Dev\(No SLA\)_/);
  });

  it('Log Analytics: table and DCR use the generated columns and transformation', async () => {
    const table = await resource(
      'modules/loganalytics.bicep',
      'Microsoft.OperationalInsights/workspaces/tables',
    );
    expect(text(prop(table.body, 'properties.schema.columns'))).toBe(
      "loadJsonContent('../generated/loganalytics-columns.json')",
    );
    const b = await get('modules/loganalytics.bicep');
    const vars = declarations(b, 'variable_declaration');
    expect(str(vars.get('tableName'))).toBe(names.laTable);
    expect(str(vars.get('streamName'))).toBe(names.dcrStream);
    const dcr = await resource('modules/loganalytics.bicep', 'Microsoft.Insights/dataCollectionRules');
    const flow =
      prop(dcr.body, 'properties.dataFlows')?.namedChildren.find((c) => c?.type === 'object') ?? undefined;
    expect(text(prop(flow, 'transformKql'))).toBe(
      "loadTextContent('../../kql/loganalytics/dcr-transform.kql')",
    );
    expect(text(prop(dcr.body, 'properties.dataSources.dataImports.eventHub.stream'))).toBe('streamName');
    const dcra = await resource(
      'modules/loganalytics.bicep',
      'Microsoft.Insights/dataCollectionRuleAssociations',
    );
    expect(text(prop(dcra.body, 'scope'))).toBe('hub');
  });

  it('alerts: LogAlert rules on the workspace, global action group with a short name of at most 12 chars', async () => {
    const rules = await resource('modules/alerts.bicep', 'Microsoft.Insights/scheduledQueryRules');
    expect(str(prop(rules.body, 'kind'))).toBe('LogAlert');
    expect(text(prop(rules.body, 'properties.skipQueryValidation'))).toBe('true');
    const ag = await resource('modules/alerts.bicep', 'Microsoft.Insights/actionGroups');
    expect(str(prop(ag.body, 'location'))).toBe('global');
    const params = declarations(await get('modules/alerts.bicep'), 'parameter_declaration');
    expect((str(params.get('actionGroupShortName')) ?? '').length).toBeLessThanOrEqual(12);
  });

  it('shipper extension: Linux Custom Script 2.1, script only in protectedSettings, install.sh embedded', async () => {
    for (const [file, type] of [
      ['modules/shipper-vm.bicep', 'Microsoft.Compute/virtualMachines/extensions'],
      ['modules/shipper-vmss.bicep', 'Microsoft.Compute/virtualMachineScaleSets/extensions'],
    ] as const) {
      const ext = await resource(file, type);
      expect(str(prop(ext.body, 'properties.publisher'))).toBe('Microsoft.Azure.Extensions');
      expect(str(prop(ext.body, 'properties.type'))).toBe('CustomScript');
      expect(str(prop(ext.body, 'properties.typeHandlerVersion'))).toBe('2.1');
      expect(text(prop(ext.body, 'properties.protectedSettings.script'))).toBe('base64(installScript)');
      expect(literal(prop(ext.body, 'properties.settings'))).toEqual({});
      const vars = declarations(await get(file), 'variable_declaration');
      expect(text(vars.get('installScript'))).toContain("loadFileAsBase64('../../../deploy/install.sh')");
      expect(text(vars.get('installScript'))).toMatch(/^'#!\/bin\/sh\\n/);
    }
  });

  it('scale sets: the exported scheduledEventsProfile enables Terminate notifications', async () => {
    const b = await get('modules/scheduled-events-profile.bicep');
    const fn = b.root.namedChildren.find((n) => n?.type === 'user_defined_function');
    expect(fn?.childForFieldName('name')?.text).toBe('scheduledEventsProfile');
    const body = fn?.namedChildren.find((c) => c?.type === 'object') ?? undefined;
    expect(text(prop(body, 'terminateNotificationProfile.enable'))).toBe('true');
    expect(text(prop(body, 'terminateNotificationProfile.notBeforeTimeout'))).toBe('notBeforeTimeout');
  });

  it('main.bicep: every parameter has a description, and the promised outputs exist', async () => {
    const b = await get('main.bicep');
    const children = b.root.namedChildren.filter((n): n is Node => !!n);
    children.forEach((n, i) => {
      if (n.type !== 'parameter_declaration') return;
      const prev = children[i - 1];
      expect(prev?.type === 'decorators' && prev.text.includes('@description('), n.text.split('\n')[0]).toBe(
        true,
      );
    });
    const outputs = [...declarations(b, 'output_declaration').keys()];
    expect(outputs).toEqual(
      expect.arrayContaining([
        'eventHubsNamespaceFqdn',
        'eventHubName',
        'identityClientId',
        'identityResourceId',
        'adxClusterUri',
        'adxDatabase',
        'logAnalyticsWorkspaceId',
        'actionGroupId',
      ]),
    );
  });
});

const bicepBin = spawnSync('bicep', ['--version'], { encoding: 'utf8' }).status === 0;
describe.skipIf(!bicepBin)('bicep CLI (only where a bicep binary is on PATH)', () => {
  it('bicep build and bicep lint succeed for main.bicep and every module', () => {
    const out = mkdtempSync(join(tmpdir(), 'bicep-build-'));
    try {
      for (const f of files) {
        const build = spawnSync('bicep', ['build', f, '--outdir', out], {
          encoding: 'utf8',
          timeout: 120_000,
        });
        expect(build.status, `${name(f)}: ${build.stderr}`).toBe(0);
        const lint = spawnSync('bicep', ['lint', f], { encoding: 'utf8', timeout: 120_000 });
        expect(lint.status, `${name(f)}: ${lint.stderr}${lint.stdout}`).toBe(0);
      }
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
