package steps

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/pki"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// ChooseSpec adopts a valid candidate unless a step is in flight, keeps the applied spec otherwise, and
// adopts nothing while paused or with unusable TLS Secrets.
func TestChooseSpec(t *testing.T) {
	size := func(n int32) api.ClusterSpec { return api.ClusterSpec{Size: &n} }
	applied, next := size(3), size(5)
	invalid := []api.Problem{{Reason: "InvalidSize"}}
	certs := []facts.CertProblem{{Secret: "tls", Problem: pki.Problem{Message: "not found"}}}
	for _, tc := range []struct {
		name                 string
		applied, recorded    *api.ClusterSpec
		cand                 facts.Candidate
		paused               bool
		inFlight             string
		want                 *api.ClusterSpec
		pending, certBlocked bool
		wait                 Wait
	}{
		{name: "first valid spec adopted", cand: facts.Candidate{Spec: next}, want: &next},
		{name: "first spec invalid: nothing to render", cand: facts.Candidate{Spec: next, Problems: invalid}},
		{name: "new spec adopted", applied: &applied, recorded: &applied, cand: facts.Candidate{Spec: next}, want: &next},
		{name: "new spec waits for the step in flight", applied: &applied, recorded: &applied, cand: facts.Candidate{Spec: next},
			inFlight: "demo-3 to join the cluster", want: &applied, pending: true},
		{name: "invalid spec leaves the applied one", applied: &applied, recorded: &applied, cand: facts.Candidate{Spec: next, Problems: invalid}, want: &applied},
		{name: "paused: the applied spec stays, the new one pending", applied: &applied, recorded: &applied, cand: facts.Candidate{Spec: next},
			paused: true, want: &applied, pending: true},
		{name: "unusable TLS Secrets block a change", applied: &applied, recorded: &applied, cand: facts.Candidate{Spec: next, CertProblems: certs},
			want: &applied, certBlocked: true},
		{name: "unusable TLS Secrets under an unchanged spec change nothing", applied: &applied, recorded: &applied,
			cand: facts.Candidate{Spec: applied, CertProblems: certs}, want: &applied},
		{name: "an invalid record and a step in flight: the spec waits", recorded: &applied, cand: facts.Candidate{Spec: next},
			inFlight: "demo-3 to join the cluster", pending: true,
			wait: Wait{Kind: Spec, Subject: "demo-3 to join the cluster", Detail: "to finish before the spec is adopted (the recorded spec fails validation: nothing is rendered from it)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &facts.Facts{Parent: &api.EtcdCluster{Spec: api.ClusterSpec{Paused: tc.paused}}, Applied: tc.applied, Recorded: tc.recorded, Candidate: tc.cand}
			c := ChooseSpec(f, SpecInput{InFlight: tc.inFlight})
			require.Equal(t, tc.want != nil, c.HasSpec)
			if tc.want != nil {
				require.Equal(t, *tc.want, c.Spec)
			}
			require.Equal(t, tc.pending, c.PendingSpec, "pending")
			require.Equal(t, tc.certBlocked, c.CertBlocked, "cert blocked")
			require.Equal(t, tc.paused, c.Paused)
			require.Equal(t, tc.cand.Problems, c.Problems)
			require.Equal(t, tc.wait, c.Wait)
		})
	}
}
