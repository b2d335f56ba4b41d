package sync

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/render"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// Status renders what the decision decided and changes none of it: for every fixture, building it twice
// gives the same status, and the plan's waits, its Lease intents, Jobs, resync pace and the facts'
// distrusted inputs are what they were before status was built. (It once added its own waits to the
// plan's, so that the resync pace depended on whether status had been built yet.)
func TestStatusChangesNothingDecided(t *testing.T) {
	n := 0
	for name, body := range requestBodies(t) {
		o, err := wire.Decode(body)
		if err != nil {
			continue // a refused fixture
		}
		p, err := decide(facts.Read(o, fixtureNow), Options{Image: FixtureImage})
		if err != nil {
			continue
		}
		waits, distrusted := slices.Clone(p.Waiting), slices.Clone(p.f.Distrusted)
		jobs, resync := len(p.jobs), p.resyncAfter()
		intents := map[int]string{}
		for i, lp := range p.leases {
			intents[i] = lp.Kind + "/" + lp.Since
		}
		first := render.Status(p.f, &p.Decision)
		second := render.Status(p.f, &p.Decision)
		require.Equal(t, first, second, "%s: status built twice differs", name)
		require.Equal(t, waits, p.Waiting, "%s: status changed the plan's waits", name)
		require.Equal(t, distrusted, p.f.Distrusted, "%s: status changed the distrusted inputs", name)
		require.Equal(t, jobs, len(p.jobs), "%s", name)
		require.Equal(t, resync, p.resyncAfter(), "%s", name)
		for i, lp := range p.leases {
			require.Equal(t, intents[i], lp.Kind+"/"+lp.Since, "%s: status changed intent %d", name, i)
		}
		n++
	}
	require.Greater(t, n, 100, "fixtures decided")
}
