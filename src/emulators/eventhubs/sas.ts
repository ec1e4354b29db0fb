/**
 * Shared Access Signature tokens as Event Hubs issues and checks them:
 * `SharedAccessSignature sr=<url-encoded audience>&sig=<url-encoded base64 HMAC-SHA256>&se=<unix s>&skn=<key name>`.
 * The HMAC key is the UTF-8 bytes of the SharedAccessKey string; the signed text is the raw
 * (still URL-encoded) `sr` value, a newline, and `se`.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export interface SasKey {
  /** SharedAccessKeyName, e.g. RootManageSharedAccessKey. */
  name: string;
  /** SharedAccessKey (used as text, never base64-decoded). */
  key: string;
}

export interface SasVerification {
  ok: boolean;
  /** 200 when ok, 401 otherwise (the status a CBS reply carries). */
  status: 200 | 401;
  /** Why the token was refused; safe to log (never contains the key or the signature). */
  reason: string;
  /** Decoded audience the token was issued for. */
  audience?: string;
  keyName?: string;
  /** Expiry, unix milliseconds. */
  expiresAtMs?: number;
}

export function signSas(audience: string, key: SasKey, expiresAtSeconds: number): string {
  const sr = encodeURIComponent(audience);
  const sig = createHmac('sha256', Buffer.from(key.key, 'utf8'))
    .update(`${sr}\n${expiresAtSeconds}`)
    .digest('base64');
  return `SharedAccessSignature sr=${sr}&sig=${encodeURIComponent(sig)}&se=${expiresAtSeconds}&skn=${encodeURIComponent(key.name)}`;
}

/** Splits `SharedAccessSignature a=b&c=d` into its raw (still encoded) fields. */
function parseFields(token: string): Map<string, string> | undefined {
  const prefix = 'SharedAccessSignature ';
  if (!token.startsWith(prefix)) return undefined;
  const fields = new Map<string, string>();
  for (const part of token.slice(prefix.length).trim().split('&')) {
    const eq = part.indexOf('=');
    if (eq <= 0) return undefined;
    fields.set(part.slice(0, eq), part.slice(eq + 1));
  }
  return fields;
}

function safeDecode(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}

/** Normalises an audience for comparison: lower case, no trailing slash. */
export function normaliseAudience(audience: string): string {
  return audience.trim().toLowerCase().replace(/\/+$/, '');
}

/** The path of an audience URI (`sb://host:port/hub/Partitions/0` → `hub/partitions/0`), lower case. */
export function audiencePath(audience: string): string {
  const a = normaliseAudience(audience);
  const m = /^[a-z][a-z0-9+.-]*:\/\/[^/]*\/?(.*)$/.exec(a);
  return (m ? (m[1] ?? '') : a).replace(/^\/+/, '');
}

/**
 * Verifies a token against the keys the namespace knows and the audience named in the CBS
 * request. Constant-time signature comparison; expiry and key name checked; the token's `sr`
 * must equal the requested audience (case-insensitive).
 */
export function verifySas(
  token: string,
  requestedAudience: string,
  keys: readonly SasKey[],
  nowMs = Date.now(),
): SasVerification {
  const deny = (reason: string, extra: Partial<SasVerification> = {}): SasVerification => ({
    ok: false,
    status: 401,
    reason,
    ...extra,
  });
  const fields = parseFields(token);
  if (!fields) return deny('malformed token: expected "SharedAccessSignature sr=…&sig=…&se=…&skn=…"');
  const srRaw = fields.get('sr');
  const sigRaw = fields.get('sig');
  const seRaw = fields.get('se');
  const sknRaw = fields.get('skn');
  if (srRaw === undefined || sigRaw === undefined || seRaw === undefined || sknRaw === undefined) {
    return deny('malformed token: sr, sig, se and skn are all required');
  }
  const audience = safeDecode(srRaw);
  const keyName = safeDecode(sknRaw);
  const sig = safeDecode(sigRaw);
  if (audience === undefined || keyName === undefined || sig === undefined)
    return deny('malformed token: bad URL encoding');
  if (!/^\d+$/.test(seRaw)) return deny('malformed token: se is not a unix time in seconds');
  const expiresAtMs = Number(seRaw) * 1000;
  const info = { audience, keyName, expiresAtMs };
  const key = keys.find((k) => k.name === keyName);
  if (!key) return deny(`unknown SharedAccessKeyName "${keyName}"`, info);
  const expected = createHmac('sha256', Buffer.from(key.key, 'utf8')).update(`${srRaw}\n${seRaw}`).digest();
  const given = Buffer.from(sig, 'base64');
  // timingSafeEqual needs equal lengths: compare against a same-length buffer either way.
  const comparable = given.length === expected.length ? given : Buffer.alloc(expected.length);
  const signatureOk = timingSafeEqual(comparable, expected) && given.length === expected.length;
  if (!signatureOk) return deny(`invalid signature for key "${keyName}"`, info);
  if (expiresAtMs <= nowMs) return deny('token expired', info);
  if (normaliseAudience(audience) !== normaliseAudience(requestedAudience)) {
    return deny(
      `token audience "${audience}" does not match the requested audience "${requestedAudience}"`,
      info,
    );
  }
  return { ok: true, status: 200, reason: 'ok', ...info };
}
