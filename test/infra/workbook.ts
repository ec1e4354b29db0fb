/**
 * Generates the Azure Workbook (infra/workbook/se-shipper.workbook.json) from the Log Analytics
 * query files, so the workbook's charts always run the checked queries.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

interface Panel {
  readonly file: string;
  readonly title: string;
  readonly visualization: 'table' | 'timechart' | 'barchart';
}

export const workbookPanels: readonly Panel[] = [
  {
    file: 'terminate-preempt-last-hour.kql',
    title: 'Terminate / Preempt in the last hour',
    visualization: 'table',
  },
  { file: 'open-maintenance.kql', title: 'Open maintenance right now', visualization: 'table' },
  { file: 'events-over-time.kql', title: 'Events per day and type', visualization: 'timechart' },
  { file: 'events-per-vm.kql', title: 'Events per VM and type (30 days)', visualization: 'barchart' },
  { file: 'notice-given.kql', title: 'Notice given: Scheduled to Started', visualization: 'table' },
  { file: 'unannounced-starts.kql', title: 'Started without notice', visualization: 'table' },
  { file: 'silent-shippers.kql', title: 'Silent shippers', visualization: 'table' },
  { file: 'latest-state-per-event.kql', title: 'Latest state per event', visualization: 'table' },
];

/** Query text as the workbook runs it: the file without `| render` (the item sets the chart). */
export function workbookQuery(repo: string, file: string): string {
  return readFileSync(join(repo, 'infra', 'kql', 'loganalytics', 'queries', file), 'utf8')
    .split('\n')
    .filter((l) => !/^\s*\|\s*render\b/.test(l))
    .join('\n')
    .trimEnd();
}

export function workbookJson(repo: string): string {
  const items: unknown[] = [
    {
      type: 1,
      name: 'title',
      content: {
        json: '## se-shipper: Azure Scheduled Events\nMaintenance events of the fleet as shipped by se-shipper (table `SeShipper_CL`).',
      },
    },
    ...workbookPanels.map((p, i) => ({
      type: 3,
      name: `query-${i}`,
      content: {
        version: 'KqlItem/1.0',
        query: workbookQuery(repo, p.file),
        size: 0,
        title: p.title,
        queryType: 0,
        resourceType: 'microsoft.operationalinsights/workspaces',
        visualization: p.visualization,
      },
    })),
  ];
  const doc = {
    version: 'Notebook/1.0',
    items,
    fallbackResourceIds: [],
    $schema: 'https://github.com/Microsoft/Application-Insights-Workbooks/blob/master/schema/workbook.json',
  };
  return `${JSON.stringify(doc, null, 2)}\n`;
}
