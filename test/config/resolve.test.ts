import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/errors.js';
import { CONNECTION_STRING_ENV } from '../../src/config/options.js';
import { resolveConfig } from '../../src/config/resolve.js';

const CS = 'Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=c2VjcmV0';

function resolve(
  flags: Record<string, unknown>,
  env: NodeJS.ProcessEnv = {},
  file?: Record<string, unknown>,
) {
  return resolveConfig({ flags, env, ...(file ? { file } : {}) });
}

describe('resolveConfig', () => {
  it('applies flags > env > file > defaults and says where each value came from', () => {
    const { config, sources } = resolve(
      { pollInterval: '500' },
      { SE_SHIPPER_POLL_INTERVAL: '700', SE_SHIPPER_SCOPE: 'all' },
      { pollInterval: 900, scope: 'self', heartbeatInterval: 60 },
    );
    expect(config).toMatchObject({
      pollInterval: 500,
      scope: 'all',
      heartbeatInterval: 60,
      imdsTimeout: 5000,
    });
    expect(sources).toMatchObject({
      pollInterval: 'flag',
      scope: 'env',
      heartbeatInterval: 'file',
      imdsTimeout: 'default',
    });
  });

  it('accepts only plain http for IMDS, as IMDS itself', () => {
    expect(() => resolve({ imdsEndpoint: 'https://169.254.169.254' })).toThrow(/must be a http:\/\/ URL/);
    expect(resolve({ imdsEndpoint: 'http://127.0.0.1:8169/' }).config.imdsEndpoint).toBe(
      'http://127.0.0.1:8169',
    );
  });

  it('parses sizes for the spool bound', () => {
    expect(resolve({ spoolMaxBytes: '64MiB' }).config.spoolMaxBytes).toBe(64 * 1024 * 1024);
    expect(() => resolve({ spoolMaxBytes: 'lots' })).toThrow(ConfigError);
  });

  describe('--sink eventhubs', () => {
    it('needs a namespace and a hub, or a connection string', () => {
      expect(() => resolve({ sink: 'eventhubs' })).toThrow(/needs --eventhubs-namespace and --eventhub/);
      expect(
        resolve({ sink: 'eventhubs', eventhubsNamespace: 'sb://ns.servicebus.windows.net/', eventhub: 'h' })
          .config,
      ).toMatchObject({ eventhubsNamespace: 'ns.servicebus.windows.net', eventhub: 'h' });
    });

    it('treats an empty connection string variable as unset', () => {
      const { config } = resolve(
        { sink: 'eventhubs', eventhubsNamespace: 'ns.servicebus.windows.net', eventhub: 'h' },
        { [CONNECTION_STRING_ENV]: '' },
      );
      expect(config.sink).toBe('eventhubs');
      expect(() => resolve({ sink: 'eventhubs' }, { [CONNECTION_STRING_ENV]: '' })).toThrow(ConfigError);
    });

    it('needs the hub from EntityPath or --eventhub, and never echoes the connection string', () => {
      let message = '';
      try {
        resolve({ sink: 'eventhubs' }, { [CONNECTION_STRING_ENV]: CS });
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).toMatch(/has no EntityPath=; give the hub with --eventhub/);
      expect(message).not.toContain('c2VjcmV0');
      expect(
        resolve({ sink: 'eventhubs', eventhub: 'h' }, { [CONNECTION_STRING_ENV]: CS }).config.eventhub,
      ).toBe('h');
      expect(
        resolve({ sink: 'eventhubs' }, { [CONNECTION_STRING_ENV]: `${CS};EntityPath=h` }).config.sink,
      ).toBe('eventhubs');
      expect(() => resolve({ sink: 'eventhubs' }, { [CONNECTION_STRING_ENV]: 'garbage' })).toThrow(
        /no Endpoint=/,
      );
    });
  });
});
