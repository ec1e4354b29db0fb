/** A bad flag, environment variable or config file value: the CLI prints it on one line and exits 2. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}
