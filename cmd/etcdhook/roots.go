package main

// The image (cmd/etcdhook/image) is built FROM scratch: it has no distribution's CA bundle, yet the
// binary talks TLS to S3, GCS and other public endpoints. This package embeds Mozilla's roots (as the
// Go project curates them) and hands them to crypto/x509 as fallback roots, which are used only when the
// system has none. A bundle the system does have still wins: on Debian, or in the image with a bundle
// mounted and SSL_CERT_FILE (or SSL_CERT_DIR) pointing at it, e.g. for a private MinIO's CA.
import _ "golang.org/x/crypto/x509roots/fallback"
