package steps

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A wait's text is the one status.message always had: the subject leads the sentence, the in-place
// restarts say their family, and two steps naming the same thing add it once.
func TestWaitText(t *testing.T) {
	require.Equal(t, "demo-2 to stop", Wait{Kind: Scale, Subject: "demo-2", Detail: "to stop"}.String())
	require.Equal(t, "demo-0 to join the cluster", Wait{Kind: InFlight, Subject: "demo-0 to join the cluster"}.String())
	require.Equal(t, "TLS switch: demo-1 to move its peer URL to https",
		Wait{Kind: TLSSwitch, Detail: "demo-1 to move its peer URL to https"}.String())
	require.Equal(t, "CA rotation: every member to report the same CA Secret",
		Wait{Kind: CARotation, Detail: "every member to report the same CA Secret"}.String())

	var ws Waits
	ws = ws.Add(Wait{Kind: InFlight, Subject: "demo-0 to join the cluster"})
	ws = ws.Add(Wait{Kind: Join, Subject: "demo-0 to join the cluster"}) // the same text from the step itself
	ws = ws.Add(Wait{Kind: Pause, Detail: "spec.paused to be false"})
	require.Len(t, ws, 2)
	require.Equal(t, "demo-0 to join the cluster; spec.paused to be false", ws.String())
	require.Equal(t, "", Waits(nil).String())
}
