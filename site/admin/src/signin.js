// The sign-in screens: email + password (SRP), then the TOTP code; a first sign-in sets a
// new password and enrols an authenticator app from a QR code; forgotten passwords.
import { field, form, h, show, announce } from './dom.js';
import { qrDataUrl } from './qr.js';

const MESSAGES = {
  NotAuthorizedException: 'The email or password is not right.',
  UserNotFoundException: 'The email or password is not right.',
  CodeMismatchException: 'That code is not right. Enter the current 6-digit code from your authenticator app.',
  EnableSoftwareTokenMFAException: 'That code is not right. Enter the current 6-digit code from your authenticator app.',
  ExpiredCodeException: 'That code has expired. Enter the current one.',
  InvalidPasswordException: 'That password does not meet the policy: at least 12 characters with upper and lower case letters, a digit and a symbol.',
  PasswordResetRequiredException: 'Your password must be reset: use "Forgot your password?".',
  TooManyRequestsException: 'Too many attempts. Wait a minute, then try again.',
  LimitExceededException: 'Too many attempts. Wait a minute, then try again.',
};

function explain(err) {
  return MESSAGES[err.code] || err.message || 'Sign-in failed.';
}

const CODE_ATTRS = { inputMode: 'numeric', autocomplete: 'one-time-code', pattern: '[0-9]{6}', maxLength: 6, required: true };

export function signInFlow(session, done) {
  async function step(result, email) {
    if (result.step === 'done') return done();
    if (result.step === 'newPassword') return newPassword(email);
    if (result.step === 'totp') return totp(email);
    if (result.step === 'enrol') return enrol(email, result);
  }

  function guard(fn) {
    return async (f) => {
      try {
        await fn(f);
      } catch (err) {
        // A challenge's session lasts a few minutes: once it is gone, start again.
        if (err.code === 'NotAuthorizedException' && /session/i.test(err.message)) {
          start('Your sign-in took too long. Please start again.');
          return;
        }
        throw new Error(explain(err));
      }
    };
  }

  function start(notice = '') {
    const email = field({ id: 'email', label: 'Email', type: 'email', autocomplete: 'username', required: true });
    const password = field({ id: 'password', label: 'Password', type: 'password', autocomplete: 'current-password', required: true });
    const f = form(
      {
        label: 'Sign in',
        submit: 'Sign in',
        testid: 'sign-in',
        action: guard(async () => {
          const address = email.input.value.trim();
          email.setError(address ? '' : 'Enter your email.');
          password.setError(password.input.value ? '' : 'Enter your password.');
          if (!address || !password.input.value) throw new Error('Enter your email and password.');
          await step(await session.signIn(address, password.input.value), address);
        }),
      },
      email,
      password,
    );
    const forgot = h('button', { type: 'button', class: 'link', onClick: () => forgotPassword(email.input.value.trim()) }, 'Forgot your password?');
    show(
      h('h1', {}, 'Sign in'),
      h('p', { class: 'muted' }, 'Race directors sign in with their email, password and an authenticator app code.'),
      notice ? h('p', { class: 'note', role: 'status' }, notice) : null,
      h('div', { class: 'panel' }, f, forgot),
    );
    email.input.focus();
  }

  function totp(email) {
    const code = field({ id: 'totp', label: 'Authenticator code', hint: 'The 6-digit code your authenticator app shows for Racecap.', ...CODE_ATTRS });
    const f = form(
      {
        label: 'Authenticator code',
        submit: 'Verify',
        testid: 'totp',
        action: guard(async () => step(await session.totp(code.input.value.trim()), email)),
      },
      code,
    );
    show(h('h1', {}, 'Enter your code'), h('div', { class: 'panel' }, f));
    code.input.focus();
  }

  function newPassword(email) {
    const password = field({
      id: 'new-password',
      label: 'New password',
      type: 'password',
      autocomplete: 'new-password',
      hint: 'At least 12 characters with upper and lower case letters, a digit and a symbol.',
      required: true,
    });
    const again = field({ id: 'new-password-again', label: 'New password again', type: 'password', autocomplete: 'new-password', required: true });
    const f = form(
      {
        label: 'Choose a password',
        submit: 'Set password',
        testid: 'new-password',
        action: guard(async () => {
          if (password.input.value !== again.input.value) {
            again.setError('The two passwords differ.');
            throw new Error('The two passwords differ.');
          }
          again.setError('');
          await step(await session.newPassword(password.input.value), email);
        }),
      },
      password,
      again,
    );
    show(h('h1', {}, 'Choose your password'), h('p', {}, 'This is your first sign-in: replace the temporary password you were sent.'), h('div', { class: 'panel' }, f));
    password.input.focus();
  }

  function enrol(email, { secret, uri }) {
    const code = field({ id: 'enrol-code', label: 'Code from your app', hint: 'After adding Racecap, enter the 6-digit code it shows.', ...CODE_ATTRS });
    const f = form(
      {
        label: 'Set up your authenticator app',
        submit: 'Finish set-up',
        testid: 'enrol',
        action: guard(async () => {
          await step(await session.enrol(code.input.value.trim()), email);
          announce('Your authenticator app is set up.');
        }),
      },
      code,
    );
    show(
      h('h1', {}, 'Set up your authenticator app'),
      h('p', {}, 'Directors can cancel registrations and refund money, so every sign-in asks for a code from an authenticator app.'),
      h('div', { class: 'panel' },
        h('img', { class: 'qr', src: qrDataUrl(uri), alt: 'QR code to add Racecap to an authenticator app', 'data-testid': 'totp-qr' }),
        h('p', {}, 'Scan it, or type this key into the app: ', h('code', { class: 'secret', 'data-testid': 'totp-secret' }, secret)),
        f,
      ),
    );
    code.input.focus();
  }

  function forgotPassword(prefill) {
    const email = field({ id: 'forgot-email', label: 'Email', type: 'email', autocomplete: 'username', value: prefill, required: true });
    const f = form(
      {
        label: 'Reset your password',
        submit: 'Send a code',
        testid: 'forgot',
        action: guard(async () => {
          await session.forgotPassword(email.input.value.trim());
          resetPassword(email.input.value.trim());
        }),
      },
      email,
    );
    show(h('h1', {}, 'Reset your password'), h('p', {}, 'We email a code to the address you sign in with.'), h('div', { class: 'panel' }, f, h('button', { type: 'button', class: 'link', onClick: () => start() }, 'Back to sign in')));
    email.input.focus();
  }

  function resetPassword(email) {
    const code = field({ id: 'reset-code', label: 'Code from the email', inputMode: 'numeric', autocomplete: 'one-time-code', required: true });
    const password = field({ id: 'reset-password', label: 'New password', type: 'password', autocomplete: 'new-password', required: true });
    const f = form(
      {
        label: 'Choose a new password',
        submit: 'Set password',
        testid: 'reset',
        action: guard(async () => {
          await session.confirmForgotPassword(email, code.input.value.trim(), password.input.value);
          start('Your password is changed. Sign in with it.');
        }),
      },
      code,
      password,
    );
    show(h('h1', {}, 'Choose a new password'), h('div', { class: 'panel' }, f));
    code.input.focus();
  }

  return { start };
}
