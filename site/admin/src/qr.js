// The TOTP enrolment's QR code, drawn locally (the secret never goes to a QR service): a
// GIF data: URL, which the console's CSP allows as an image (img-src 'self' data:).
import qrcode from 'qrcode-generator';

export function qrDataUrl(text) {
  const qr = qrcode(0, 'M');
  qr.addData(text);
  qr.make();
  return qr.createDataURL(6, 4);
}
