import pino, { type Logger } from 'pino';

export type { Logger } from 'pino';

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * Paths pino censors wherever they appear in a log object. Connection strings and SAS keys
 * must never reach a log line, even when an error object carrying them is logged whole.
 */
export const REDACTED_PATHS = [
  'connectionString',
  '*.connectionString',
  'sharedAccessKey',
  '*.sharedAccessKey',
  'key',
  '*.key',
  'token',
  '*.token',
  'password',
  '*.password',
  'authorization',
  '*.authorization',
  'headers.authorization',
  '*.headers.authorization',
];

const SECRET_PATTERNS: RegExp[] = [
  /(SharedAccessKey=)[^;"'\s]+/gi,
  /(SharedAccessSignature\s+)[^"'\s]+/gi,
  /(sig=)[^&;"'\s]+/gi,
];

/** Scrubs secrets out of free text (error messages, URLs) before it is logged or printed. */
export function redactSecrets(text: string): string {
  let out = text;
  for (const pattern of SECRET_PATTERNS) out = out.replace(pattern, '$1[REDACTED]');
  return out;
}

export interface LoggerOptions {
  level?: LogLevel;
  /** Defaults to stderr so that stdout stays pure NDJSON for the stdout sink. */
  destination?: pino.DestinationStream;
  base?: Record<string, unknown>;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const destination = options.destination ?? pino.destination({ dest: 2, sync: true });
  return pino(
    {
      level: options.level ?? 'info',
      base: options.base ?? { name: 'se-shipper' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACTED_PATHS, censor: '[REDACTED]' },
      formatters: { level: (label) => ({ level: label }) },
      serializers: {
        err: (err: unknown) => {
          const s = pino.stdSerializers.err(err as Error);
          if (typeof s.message === 'string') s.message = redactSecrets(s.message);
          if (typeof s.stack === 'string') s.stack = redactSecrets(s.stack);
          return s;
        },
      },
    },
    destination,
  );
}
