package steps

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// PeerSwitch returns where the switch stands: the mode TLSModeOf found, the final roll ended once the
// roll is over, and a turn only in the peers phase.
func TestPeerSwitchState(t *testing.T) {
	on := api.ClusterSpec{Security: api.SecuritySpec{TLS: api.TLSSpec{Enabled: new(true)}}}
	f := &facts.Facts{Parent: &api.EtcdCluster{}}
	for _, tc := range []struct {
		name            string
		state           TLSSwitchState
		rolled, rolling bool
		want            TLSSwitchState
	}{
		{"no switch: the mode stays", TLSSwitchState{Mode: TLSOn, Turn: -1}, true, false, TLSSwitchState{Mode: TLSOn, Turn: -1}},
		{"final roll over", TLSSwitchState{Mode: TLSOn, Final: true, From: "http", Turn: -1}, true, false, TLSSwitchState{Mode: TLSOn, From: "http", Turn: -1}},
		{"final roll not evaluated", TLSSwitchState{Mode: TLSOn, Final: true, From: "http", Turn: -1}, false, false,
			TLSSwitchState{Mode: TLSOn, Final: true, From: "http", Turn: -1, Status: &api.TLSSwitch{To: "https", Phase: api.TLSSwitchRollingOut, Waiting: "the rolling update to the final template"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := PeerSwitch(f, PeerSwitchInput{Spec: on, State: tc.state, Rolled: tc.rolled, Rolling: tc.rolling})
			require.Equal(t, tc.want, d.State)
			require.Equal(t, "https", d.To)
			require.Zero(t, d.Wait)
		})
	}
}
