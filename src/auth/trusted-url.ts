/**
 * isTrustedUrl tells whether keys may be fetched from `url`: https, or plain http only to this
 * machine (a local issuer in tests or development). Keys fetched over plain HTTP from elsewhere
 * could be replaced on the way, and with them every token forged.
 */
export function isTrustedUrl(url: URL): boolean {
  return url.protocol === 'https:' || (url.protocol === 'http:' && ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname));
}
