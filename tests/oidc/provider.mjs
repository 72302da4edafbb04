// A real OpenID Provider for the single sign-on tests: node-oidc-provider (package.json),
// with its own login and consent pages (devInteractions: any password signs in as the
// account named), test accounts with a `groups` claim, PKCE required, RP-initiated logout.
//
// Started by tests/oidc/provider.py: node tests/oidc/provider.mjs PORT CONFIG_JSON
// CONFIG_JSON: {"issuer", "client_id", "client_secret", "redirect_uris",
// "post_logout_redirect_uris", "accounts": {"alice": {"sub", "groups"}, ...}}.
// Prints "READY" once it listens.
//
// A test makes it misbehave through POST /__test/mode?mode=NAME (a Koa middleware rewrites
// the token endpoint's answer; the ID token is re-signed with jose):
//   normal         as the provider answers
//   wrong-aud      the ID token's aud is another client
//   bad-signature  signed with a key the provider never published, under its key's kid
//   expired        exp an hour ago
//   nonce          a nonce the console never sent
//   rotated        the provider has switched to a new signing key: ID tokens are signed
//                  with it, and /jwks publishes only it (the console must fetch it again)
// GET /__test/mode answers the mode and how often /jwks was read.

import { readFileSync } from 'node:fs';

import * as jose from 'jose';
import Provider from 'oidc-provider';

const port = Number(process.argv[2]);
const config = JSON.parse(readFileSync(process.argv[3], 'utf8'));

async function signingKey(kid) {
  const { privateKey } = await jose.generateKeyPair('RS256', { extractable: true });
  const jwk = await jose.exportJWK(privateKey);
  return { ...jwk, kid, alg: 'RS256', use: 'sig' };
}

function publicPart(jwk) {
  const { kty, n, e, kid, alg, use } = jwk;
  return { kty, n, e, kid, alg, use };
}

const original = await signingKey('key-1');
const next = await signingKey('key-2');
const stranger = await signingKey('key-1'); // the same kid, another key: a forgery

const bySub = Object.fromEntries(
  Object.entries(config.accounts).map(([name, account]) => [account.sub, name]),
);
let mode = 'normal';
let jwksReads = 0;

const provider = new Provider(config.issuer, {
  clients: [
    {
      client_id: config.client_id,
      client_secret: config.client_secret,
      redirect_uris: config.redirect_uris,
      post_logout_redirect_uris: config.post_logout_redirect_uris,
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    },
  ],
  jwks: { keys: [original] },
  pkce: { required: () => true },
  claims: {
    openid: ['sub'],
    profile: ['preferred_username', 'name'],
    email: ['email'],
    groups: ['groups'],
  },
  scopes: ['openid', 'profile', 'email', 'groups'],
  features: {
    devInteractions: { enabled: true },
    rpInitiatedLogout: { enabled: true },
  },
  // The account id is the sub (devInteractions takes it as the login typed); the username
  // the console gets is preferred_username.
  async findAccount(ctx, id) {
    const name = bySub[id];
    const account = config.accounts[name];
    if (!account) return undefined;
    return {
      accountId: account.sub,
      async claims() {
        return {
          sub: account.sub,
          preferred_username: name,
          name,
          email: `${name}@example.test`,
          groups: account.groups,
        };
      },
    };
  },
  // Errors in the log and on a plain page a test can read.
  async renderError(ctx, out, error) {
    console.error('provider error:', JSON.stringify(out), error?.message);
    ctx.type = 'html';
    ctx.body = `<!DOCTYPE html><html lang="en"><title>Provider error</title><h1>Provider error</h1><pre id="error">${JSON.stringify(out).replace(/[<>&]/g, '')}</pre></html>`;
  },
  ttl: { Session: 3600, Interaction: 600, Grant: 3600, AccessToken: 600, AuthorizationCode: 60, IdToken: 600 },
});

async function resign(idToken) {
  const payload = jose.decodeJwt(idToken);
  const now = Math.floor(Date.now() / 1000);
  let key = original;
  if (mode === 'wrong-aud') payload.aud = 'another-client';
  if (mode === 'expired') {
    payload.iat = now - 7200;
    payload.exp = now - 3600;
  }
  if (mode === 'nonce') payload.nonce = 'not-the-nonce-the-console-sent';
  if (mode === 'bad-signature') key = stranger;
  if (mode === 'rotated') key = next;
  const privateKey = await jose.importJWK(key, 'RS256');
  return new jose.SignJWT(payload)
    .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'JWT' })
    .sign(privateKey);
}

provider.use(async (ctx, nextMiddleware) => {
  if (ctx.path === '/__test/mode') {
    if (ctx.method === 'POST') mode = ctx.query.mode || 'normal';
    ctx.body = { mode, jwks_reads: jwksReads };
    return;
  }
  await nextMiddleware();
  const route = ctx.oidc?.route;
  if (route === 'jwks') {
    jwksReads += 1;
    if (mode === 'rotated') ctx.body = { keys: [publicPart(next)] };
  }
  if (route === 'token' && ctx.body?.id_token && mode !== 'normal') {
    ctx.body = { ...ctx.body, id_token: await resign(ctx.body.id_token) };
  }
});

provider.listen(port, '127.0.0.1', () => {
  process.stdout.write('READY\n');
});
