package membership

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
)

// BenchmarkLeaderChange measures what one leader change costs a client that does not retry (issue 28):
// a writer connected to one member writes every ETCDHOOK_BENCH_EVERY (default 20 ms) while leadership
// moves round the three members of a real etcd (the newest version), one MoveLeader an iteration, and
// the failed writes are counted apart for the changes away from the writer's member (its own proposals
// are refused at once while its leader hands over: "raft proposal dropped") and between the two others
// (the proposals it forwards are dropped without an answer). A load run, not a test:
// `go test ./membership -run - -bench LeaderChange -benchtime 100x`.
func BenchmarkLeaderChange(b *testing.B) {
	every := benchEnv("ETCDHOOK_BENCH_EVERY", 20*time.Millisecond, time.Nanosecond)
	c := bootstrapped(b, newestEtcd, 3)
	cl := c.clientOf(c.slots[0].clientURL)
	defer cl.Close()
	w := startBenchWriter(cl, "lc/", every)
	defer w.Stop()
	ids := []string{c.memberID(0), c.memberID(1), c.memberID(2)}
	var own, others []string
	e := c.etcd(0)
	b.ResetTimer()
	for i := range b.N {
		from := slices.Index(ids, c.leader())
		require.GreaterOrEqual(b, from, 0, "the leader is one of the three")
		to := (from + 1) % 3
		step := fmt.Sprintf("change %d: %d -> %d", i, from, to)
		w.Step(step)
		if from == 0 {
			own = append(own, step)
		} else {
			others = append(others, step)
		}
		id, _ := api.ParseID(ids[to])
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		require.NoError(b, e.MoveLeader(ctx, c.slots[from].clientURL, id))
		cancel()
		// Past the writes in flight at the change and the client's timeout for those dropped silently.
		time.Sleep(2500 * time.Millisecond)
	}
	ownFailed, othersFailed := reportFailed(b, w, "change", own, others)
	b.Logf("%d changes (%d away from the writer's member, %d between the others), a write every %s: %d failed (%d, %d)",
		b.N, len(own), len(others), every, ownFailed+othersFailed, ownFailed, othersFailed)
}
