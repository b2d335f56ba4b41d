package facts

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestImageVersion(t *testing.T) {
	for image, want := range map[string]string{
		"quay.io/coreos/etcd:v3.6.16":                   "3.6.16",
		"registry:5000/etcd:3.5.21":                     "3.5.21",
		"quay.io/coreos/etcd:v3.6.16@sha256:0123456789": "3.6.16",
		"registry:5000/etcd":                            "",
		"quay.io/coreos/etcd:latest":                    "",
		"quay.io/coreos/etcd@sha256:0123":               "",
	} {
		v, ok := imageVersion(image)
		if want == "" {
			require.False(t, ok, image)
			continue
		}
		require.True(t, ok, image)
		require.Equal(t, want, v.String(), image)
	}
}

// A record an older hook wrote quoted a refused value with its secret in RefusedWhy: read, it keeps a
// fingerprint and no reason text.
func TestOldRecordIsScrubbed(t *testing.T) {
	rec := &InPlaceRecord{Seen: []string{"s3://k:s3cr3t@b/p/latest"}, Refused: "s3://k:s3cr3t@b/p/latest",
		RefusedWhy: `annotation etcd.io/restore-from "s3://k:s3cr3t@b/p/latest" must not carry user info`,
		Prior:      &InPlaceRecord{Seen: []string{"s3://b/p/latest#s3cr3t"}}}
	rec.scrub()
	b, err := json.Marshal(rec)
	require.NoError(t, err)
	require.NotContains(t, string(b), "s3cr3t")
	require.True(t, rec.seen("s3://k:s3cr3t@b/p/latest"), "still acted on once")
}
