package facts

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
)

// spec.auth may go only once etcd no longer enforces it: the record saying enabled: false is not enough
// while the leader's agent still reports auth on (it applies the change a look later).
func TestAuthRemovalRefused(t *testing.T) {
	on, off := &api.AuthReport{Enabled: true}, &api.AuthReport{Enabled: false}
	disabled := api.ClusterSpec{Auth: &api.AuthSpec{}}
	for _, tc := range []struct {
		name     string
		recorded *api.ClusterSpec
		next     api.ClusterSpec
		rep      *api.AuthReport
		refused  bool
	}{
		{"removed while etcd still enforces", &disabled, api.ClusterSpec{}, on, true},
		{"removed once etcd stopped enforcing", &disabled, api.ClusterSpec{}, off, false},
		{"removed, no leader's report", &disabled, api.ClusterSpec{}, nil, false},
		{"kept while etcd enforces", &disabled, disabled, on, false},
		{"never declared (a hand-made auth)", &api.ClusterSpec{}, api.ClusterSpec{}, on, false},
		{"no record", nil, api.ClusterSpec{}, on, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := authRemovalRefused(tc.recorded, tc.next, tc.rep)
			if !tc.refused {
				require.Empty(t, ps)
				return
			}
			require.Len(t, ps, 1)
			require.Equal(t, "InvalidAuth", ps[0].Reason)
			require.Contains(t, ps[0].Message, "status.auth.enabled")
		})
	}
}
