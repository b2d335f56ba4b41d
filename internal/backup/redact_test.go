package backup

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A location's secrets never reach a message (issue 24 §5): user info, a fragment, a parameter no
// scheme takes (a signed URL's signature), credentials in an endpoint.
func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"s3://b/p?region=eu-west-1", "s3://b/p?region=eu-west-1"},
		{"gs://b/p/latest", "gs://b/p/latest"},
		{"s3://AKIAEXAMPLE:s3cr3t@b/p", "s3://REDACTED@b/p"},
		{"s3://b/p?X-Amz-Signature=s3cr3t&region=x", "s3://b/p?X-Amz-Signature=REDACTED&region=x"},
		{"s3://b/p?endpoint=http://user:s3cr3t@minio:9000", "s3://b/p?endpoint=http://REDACTED%40minio:9000"},
		{"s3://b/p#s3cr3t", "s3://b/p#REDACTED"},
		{"s3://b/p?%zz=s3cr3t", "s3://b/p?REDACTED"},
		{"::s3cr3t", "(a value that is not a URL, not quoted)"},
		{"mailto:s3cr3t", "(a value that is not a URL, not quoted)"},
	} {
		got := Redact(tc.in)
		require.Equal(t, tc.want, got, tc.in)
		require.NotContains(t, got, "s3cr3t")
		require.Equal(t, tc.in == tc.want, Secretless(tc.in), tc.in)
	}
}

func TestFingerprint(t *testing.T) {
	require.Equal(t, "gs://b/p/latest", Fingerprint("gs://b/p/latest"))
	f := Fingerprint("s3://k:s3cr3t@b/p")
	require.True(t, strings.HasPrefix(f, "sha256:"))
	require.NotContains(t, f, "s3cr3t")
	require.Equal(t, f, Fingerprint("s3://k:s3cr3t@b/p"))
	require.NotEqual(t, f, Fingerprint("s3://k:other@b/p"))
	require.Equal(t, f, Fingerprint(f), "a fingerprint read back from a record stays what it is")
}

// A refused location's error says what is wrong without quoting its secrets: url.Parse's error quotes
// the whole value, and an endpoint was quoted whole.
func TestParseErrorsQuoteNoSecret(t *testing.T) {
	for _, raw := range []string{
		"s3://AKIA:s3cr3t@b/p%zz",
		"s3://b/p?endpoint=ftp://u:s3cr3t@h",
		"s3://b/p?endpoint=http://u:s3cr3t@h/path",
		"gs://b/p?endpoint=https://u:s3cr3t@h",
		"s3://b/p?endpoint=%zzs3cr3t",
	} {
		_, err := ParseDestination(raw)
		require.Error(t, err, raw)
		require.NotContains(t, err.Error(), "s3cr3t", raw)
	}
}
