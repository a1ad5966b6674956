// Cognito's user-pool API as the browser calls it: unsigned JSON requests (InitiateAuth,
// RespondToAuthChallenge, AssociateSoftwareToken, VerifySoftwareToken, GlobalSignOut …) to
// the pool's regional endpoint. The same calls reach moto's cognito-idp on the local stack:
// only config.json's endpoint differs, so there is one code path for AWS and local.

export class CognitoError extends Error {
  constructor(code, message) {
    super(message || code);
    this.code = code;
  }
}

export function cognito(config) {
  async function call(action, body) {
    let response;
    try {
      response = await fetch(config.endpoint, {
        method: 'POST',
        credentials: 'omit', // nothing ambient: every call carries what it needs in its body
        headers: {
          'Content-Type': 'application/x-amz-json-1.1',
          'X-Amz-Target': `AWSCognitoIdentityProviderService.${action}`,
        },
        body: JSON.stringify(body),
      });
    } catch {
      throw new CognitoError('NetworkError', 'The sign-in service cannot be reached. Check the connection and try again.');
    }
    const data = await response.json().catch(() => ({}));
    if (!response.ok) {
      // "__type" may be "NotAuthorizedException" or "com.amazonaws…#NotAuthorizedException".
      const type = String(data.__type || response.headers.get('x-amzn-errortype') || 'Error');
      throw new CognitoError(type.split('#').pop().split(':')[0], data.message || data.Message || '');
    }
    return data;
  }
  const clientId = config.clientId;
  return {
    initiateSrp: (username, srpA) =>
      call('InitiateAuth', { AuthFlow: 'USER_SRP_AUTH', ClientId: clientId, AuthParameters: { USERNAME: username, SRP_A: srpA } }),
    refresh: (refreshToken) =>
      call('InitiateAuth', { AuthFlow: 'REFRESH_TOKEN_AUTH', ClientId: clientId, AuthParameters: { REFRESH_TOKEN: refreshToken } }),
    respond: (challenge, session, responses) =>
      call('RespondToAuthChallenge', { ClientId: clientId, ChallengeName: challenge, Session: session, ChallengeResponses: responses }),
    associateSoftwareToken: (session) => call('AssociateSoftwareToken', { Session: session }),
    verifySoftwareToken: (session, code) =>
      call('VerifySoftwareToken', { Session: session, UserCode: code, FriendlyDeviceName: 'Racecap console' }),
    preferTotp: (accessToken) =>
      call('SetUserMFAPreference', { AccessToken: accessToken, SoftwareTokenMfaSettings: { Enabled: true, PreferredMfa: true } }),
    globalSignOut: (accessToken) => call('GlobalSignOut', { AccessToken: accessToken }),
    forgotPassword: (username) => call('ForgotPassword', { ClientId: clientId, Username: username }),
    confirmForgotPassword: (username, code, password) =>
      call('ConfirmForgotPassword', { ClientId: clientId, Username: username, ConfirmationCode: code, Password: password }),
  };
}
