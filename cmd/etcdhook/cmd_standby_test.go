package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/internal/standby"
)

// A stop is named in status by its reason's short name, with the object and the revision reached.
func TestStandbyStopOf(t *testing.T) {
	for want, reason := range map[string]error{"Missing": standby.ErrMissing, "Foreign": standby.ErrForeign, "Broken": standby.ErrBroken, "Gap": standby.ErrGap, "Diverged": standby.ErrDiverged} {
		s := standbyStopOf(&standby.Stopped{Reason: reason, Object: "ns/p/chains/9/x", Reached: 9, Err: fmt.Errorf("detail")})
		require.Equal(t, want, s.Reason)
		require.Equal(t, "ns/p/chains/9/x", s.Object)
		require.Equal(t, int64(9), s.Revision)
		require.Equal(t, "detail", s.Message)
	}
}
