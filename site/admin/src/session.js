// The director's session: sign-in (SRP, then TOTP; a first sign-in's new password and TOTP
// enrolment), token refresh and global sign-out.
//
// Where the tokens live, and why: the ID and access tokens only in this module's memory
// (never in storage, a cookie or a URL); the refresh token in sessionStorage, so a reload of
// this tab stays signed in while another tab, another site and a closed tab do not. The
// console runs under its own strict CSP (no inline or third-party script) and sends the ID
// token itself in an Authorization header, so there is no cookie to ride on (no CSRF).
// Sign-out is Cognito's GlobalSignOut: every refresh token of the director stops working.

import { cognito, CognitoError } from './cognito.js';
import { cognitoTimestamp, passwordClaimSignature, randomSmallA, srpA } from './srp.js';

const REFRESH_KEY = 'racecap.console.refresh';
const EARLY_S = 60; // refresh an ID token this long before it expires

function claimsOf(jwt) {
  const bin = atob(jwt.split('.')[1].replace(/-/g, '+').replace(/_/g, '/'));
  return JSON.parse(new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0))));
}

export function createSession(config, { storage = globalThis.sessionStorage, onChange = () => {} } = {}) {
  const idp = cognito(config);
  let tokens = null; // { idToken, accessToken, claims }
  let pending = null; // the challenge being answered: { name, session, username }

  function adopt(result, refreshToken) {
    tokens = { idToken: result.IdToken, accessToken: result.AccessToken, claims: claimsOf(result.IdToken) };
    if (refreshToken) storage.setItem(REFRESH_KEY, refreshToken);
    pending = null;
    onChange();
  }

  // What the caller shows next: {step: 'done'} or {step: 'newPassword'|'totp'|'enrol', …}.
  async function next(answer, username) {
    if (answer.AuthenticationResult) {
      adopt(answer.AuthenticationResult, answer.AuthenticationResult.RefreshToken);
      if (pending?.enrolled) await idp.preferTotp(tokens.accessToken);
      return { step: 'done' };
    }
    const name = answer.ChallengeName;
    pending = { name, session: answer.Session, username: answer.ChallengeParameters?.USERNAME || username };
    if (name === 'NEW_PASSWORD_REQUIRED') return { step: 'newPassword' };
    if (name === 'SOFTWARE_TOKEN_MFA') return { step: 'totp' };
    if (name === 'MFA_SETUP') {
      const associated = await idp.associateSoftwareToken(pending.session);
      pending.session = associated.Session || pending.session;
      return { step: 'enrol', secret: associated.SecretCode, uri: otpauthUri(username, associated.SecretCode) };
    }
    throw new CognitoError('UnsupportedChallenge', `The sign-in asked for ${name}, which this console cannot answer.`);
  }

  function otpauthUri(username, secret) {
    const label = encodeURIComponent(`Racecap:${username}`);
    return `otpauth://totp/${label}?secret=${secret}&issuer=Racecap`;
  }

  return {
    get signedIn() {
      return tokens !== null;
    },
    get director() {
      return tokens ? { email: tokens.claims.email, sub: tokens.claims.sub, expires: tokens.claims.exp } : null;
    },

    async signIn(email, password) {
      const smallA = randomSmallA();
      const started = await idp.initiateSrp(email, srpA(smallA));
      if (started.ChallengeName !== 'PASSWORD_VERIFIER') return next(started, email);
      const p = started.ChallengeParameters;
      const timestamp = cognitoTimestamp(new Date());
      const signature = await passwordClaimSignature({
        poolId: config.userPoolId,
        userIdForSrp: p.USER_ID_FOR_SRP,
        password,
        saltHex: p.SALT,
        srpBHex: p.SRP_B,
        secretBlock: p.SECRET_BLOCK,
        timestamp,
        smallA,
      });
      const answer = await idp.respond('PASSWORD_VERIFIER', started.Session, {
        USERNAME: p.USERNAME || email,
        TIMESTAMP: timestamp,
        PASSWORD_CLAIM_SECRET_BLOCK: p.SECRET_BLOCK,
        PASSWORD_CLAIM_SIGNATURE: signature,
      });
      return next(answer, email);
    },

    async newPassword(password) {
      const { username, session } = pending;
      return next(await idp.respond('NEW_PASSWORD_REQUIRED', session, { USERNAME: username, NEW_PASSWORD: password }), username);
    },

    async totp(code) {
      const { username, session } = pending;
      return next(await idp.respond('SOFTWARE_TOKEN_MFA', session, { USERNAME: username, SOFTWARE_TOKEN_MFA_CODE: code }), username);
    },

    async enrol(code) {
      const { username } = pending;
      const verified = await idp.verifySoftwareToken(pending.session, code);
      if (verified.Status !== 'SUCCESS') throw new CognitoError('CodeMismatchException', 'That code was not accepted.');
      pending = { ...pending, session: verified.Session, enrolled: true };
      return next(await idp.respond('MFA_SETUP', verified.Session, { USERNAME: username }), username);
    },

    forgotPassword: (email) => idp.forgotPassword(email),
    confirmForgotPassword: (email, code, password) => idp.confirmForgotPassword(email, code, password),

    /** Resume this tab's session from its refresh token; false when there is none or it is refused. */
    async resume() {
      const refreshToken = storage.getItem(REFRESH_KEY);
      if (!refreshToken) return false;
      try {
        adopt((await idp.refresh(refreshToken)).AuthenticationResult);
        return true;
      } catch (err) {
        if (err.code === 'NotAuthorizedException') storage.removeItem(REFRESH_KEY);
        return false;
      }
    },

    /** The ID token for an API call, refreshed first when it is about to expire. */
    async idToken({ force = false } = {}) {
      if (!tokens) return null;
      if (force || tokens.claims.exp - Date.now() / 1000 < EARLY_S) {
        if (!(await this.resume())) {
          tokens = null;
          onChange();
          return null;
        }
      }
      return tokens.idToken;
    },

    async signOut() {
      const access = tokens?.accessToken;
      tokens = null;
      pending = null;
      storage.removeItem(REFRESH_KEY);
      try {
        if (access) await idp.globalSignOut(access);
      } finally {
        onChange();
      }
    },
  };
}
