package sync

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// peerSchemesAsked: the etcd.io/peer-scheme value on each member Lease, by ordinal.
func (w *world) peerSchemesAsked() []string {
	var out []string
	for _, i := range sortedKeys(w.leases) {
		out = append(out, stringOf(w.leaseIntent(i)[api.AnnPeerScheme]))
	}
	return out
}

func (w *world) peerSchemes() []string {
	var out []string
	for _, m := range w.etcd.members {
		out = append(out, facts.PeerScheme(m.PeerURL))
	}
	return out
}

// switchTLS sets spec.security.tls.enabled and steps until the switch is over, checking at every step
// what must hold throughout: one peer URL move asked at a time, and only once every pod runs the
// transition template; no membership change; nothing degraded. It returns the phases seen.
func switchTLS(t *testing.T, w *world, on bool) map[string]bool {
	t.Helper()
	ids := w.memberIDs()
	w.setSpec(func(s *api.ClusterSpec) { s.Security.TLS.Enabled = ptr(on) })
	to := api.Scheme(on)
	phases := map[string]bool{}
	w.peerSwitches = nil
	for step := 0; step < 150; step++ {
		w.step(5 * time.Second)
		asked := 0
		for i, v := range w.peerSchemesAsked() {
			if v == "" {
				continue
			}
			asked++
			require.Equal(t, to, v, "step %d", step)
			for j, p := range w.pods {
				require.NotEmpty(t, p.transition, "step %d: %s asked to move its peer URL while pod %d runs another template", step, w.names().Pod(i), j)
				require.Equal(t, w.updateRevision(), p.revision, "step %d", step)
			}
		}
		require.LessOrEqual(t, asked, 1, "one member moves its peer URL at a time (step %d)", step)
		require.Equal(t, ids, w.memberIDs(), "no membership change (step %d)", step)
		for _, c := range w.status.Conditions {
			if c.Type == api.CondDegraded {
				require.Equal(t, "False", string(c.Status), "step %d: %s", step, c.Message)
			}
		}
		if w.status.TLS != nil && w.status.TLS.Switch != nil {
			phases[w.status.TLS.Switch.Phase] = true
			continue
		}
		if len(phases) > 0 && w.status.Phase == api.PhaseRunning && w.stable() {
			break
		}
	}
	require.Nil(t, w.statusTLSSwitch(), "the switch is over")
	require.Equal(t, []string{to, to, to}, w.peerSchemes())
	moved := slices.Clone(w.peerSwitches)
	slices.Sort(moved)
	require.Equal(t, []int{0, 1, 2}, moved, "each member moved its peer URL once")
	for i, p := range w.pods {
		require.Empty(t, p.transition, "pod %d runs the final template", i)
		require.Equal(t, to, p.peerScheme, "pod %d", i)
	}
	sts := string(mustJSON(w.sts()))
	require.NotContains(t, sts, api.AnnTLSSwitch)
	require.Equal(t, on, strings.Contains(sts, "--cert-file="))
	require.Equal(t, []string{"", "", ""}, w.peerSchemesAsked())
	return phases
}

func (w *world) memberIDs() []string {
	var out []string
	for _, m := range w.etcd.members {
		out = append(out, m.ID)
	}
	return out
}

func (w *world) statusTLSSwitch() *api.TLSSwitch {
	if w.status.TLS == nil {
		return nil
	}
	return w.status.TLS.Switch
}

// spec.security.tls.enabled switched on, then off, on a running cluster (docs/design/14-tls.md §14.8): a roll
// to the transition template, each member's peer URL moved one at a time, a roll to the final template.
func TestTLSSwitchOnAndOff(t *testing.T) {
	w := newWorld(t, 3)
	w.spec.Security.TLS.Enabled = ptr(false)
	w.converge(60)
	require.Equal(t, []string{"http", "http", "http"}, w.peerSchemes())

	all := map[string]bool{api.TLSSwitchRollingIn: true, api.TLSSwitchPeers: true, api.TLSSwitchRollingOut: true}
	require.Equal(t, all, switchTLS(t, w, true))
	require.Equal(t, all, switchTLS(t, w, false))
}

// A member that is down holds the next peer URL move; the switch resumes when it is back.
func TestTLSSwitchWaitsForHealthyMembers(t *testing.T) {
	w := newWorld(t, 3)
	w.spec.Security.TLS.Enabled = ptr(false)
	w.converge(60)
	w.setSpec(func(s *api.ClusterSpec) { s.Security.TLS.Enabled = ptr(true) })
	stepUntil(w, func() bool { s := w.statusTLSSwitch(); return s != nil && s.Phase == api.TLSSwitchPeers })
	w.down[1] = true
	for step := 0; step < 10; step++ {
		w.step(5 * time.Second)
	}
	moved := len(w.peerSwitches)
	for step := 0; step < 10; step++ {
		w.step(5 * time.Second)
		asked := w.peerSchemesAsked()
		for i, v := range asked {
			require.True(t, v == "" || i == 1, "no move beside a member that is down: %v", asked)
		}
	}
	require.Equal(t, moved, len(w.peerSwitches))
	require.Contains(t, w.statusTLSSwitch().Waiting, "demo-1")
	w.down[1] = false
	stepUntil(w, func() bool { return w.statusTLSSwitch() == nil && w.stable() })
	require.Equal(t, []string{"https", "https", "https"}, w.peerSchemes())
}

// One member: its peer URL moves through itself (the update needs only its own vote), and the switch
// ends like any other.
func TestTLSSwitchOneMember(t *testing.T) {
	w := newWorld(t, 1)
	w.spec.Security.TLS.Enabled = ptr(false)
	w.converge(60)
	w.setSpec(func(s *api.ClusterSpec) { s.Security.TLS.Enabled = ptr(true) })
	stepUntil(w, func() bool { return w.statusTLSSwitch() == nil && w.stable() && w.status.Phase == api.PhaseRunning })
	require.Equal(t, []string{"https"}, w.peerSchemes())
	require.Equal(t, []int{0}, w.peerSwitches)
}

// A switch asked while a CA rotation runs waits for it, and the rotation is not held by the waiting
// spec: it finishes, then the switch runs.
func TestTLSSwitchAfterCARotation(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	w.parentAnn = map[string]string{api.AnnRotateCA: "ca-2027"}
	w.step(5 * time.Second)
	w.step(5 * time.Second)
	w.setSpec(func(s *api.ClusterSpec) { s.Security.TLS.Enabled = ptr(false) })
	underway := func() bool {
		if w.ca.secret.Next != "" {
			return true
		}
		for _, p := range w.pods {
			if w.ca.trust[p.uid] != w.ca.secret.Current {
				return true
			}
		}
		return false
	}
	for step := 0; step < 100 && underway(); step++ {
		require.Equal(t, []string{"", "", ""}, w.peerSchemesAsked(), "no peer URL moves during the rotation (step %d)", step)
		require.Nil(t, w.statusTLSSwitch(), "step %d", step)
		w.step(5 * time.Second)
	}
	require.False(t, underway(), "the rotation finished although a spec change waits")
	require.Equal(t, api.RenewalMark("ca-2027"), w.ca.secret.CurrentMark)
	stepUntil(w, func() bool { return w.statusTLSSwitch() == nil && w.stable() && w.status.Phase == api.PhaseRunning })
	require.Equal(t, []string{"http", "http", "http"}, w.peerSchemes())
}

// etcd.io/hold-tls-switch keeps a switch before its final roll: every peer URL moved, both schemes
// served, until the annotation goes; then the final roll runs.
func TestTLSSwitchHeldBeforeFinalRoll(t *testing.T) {
	w := newWorld(t, 3)
	w.spec.Security.TLS.Enabled = ptr(false)
	w.converge(60)
	w.parentAnn = map[string]string{api.AnnHoldTLSSwitch: "clients-moving"}
	w.setSpec(func(s *api.ClusterSpec) { s.Security.TLS.Enabled = ptr(true) })
	stepUntil(w, func() bool { s := w.statusTLSSwitch(); return s != nil && s.Switched == 3 })
	for step := 0; step < 20; step++ {
		w.step(5 * time.Second)
		s := w.statusTLSSwitch()
		require.NotNil(t, s, "step %d", step)
		require.Equal(t, api.TLSSwitchPeers, s.Phase, "step %d: held before the final roll", step)
		require.Contains(t, s.Waiting, api.AnnHoldTLSSwitch)
		for i, p := range w.pods {
			require.Equal(t, "http", p.transition, "pod %d keeps serving both schemes", i)
		}
	}
	require.Equal(t, []string{"https", "https", "https"}, w.peerSchemes())
	w.parentAnn = nil
	stepUntil(w, func() bool { return w.statusTLSSwitch() == nil && w.stable() && w.status.Phase == api.PhaseRunning })
	for i, p := range w.pods {
		require.Empty(t, p.transition, "pod %d runs the final template", i)
	}
}
