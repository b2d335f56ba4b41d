package membership

import (
	"context"
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/writer"
)

// clientScheme talks to every member through scheme (https with the client Secret, read at every
// handshake), whatever the template: a user's client before or after it moves.
func (c *tcluster) clientScheme(scheme string) *clientv3.Client {
	var eps []string
	for _, s := range c.slots {
		eps = append(eps, withScheme(s.clientURL, scheme))
	}
	return c.newClient(eps, scheme == "https")
}

// startWriterOn runs the continuous writer through cl (keys under prefix).
func startWriterOn(c *tcluster, cl *clientv3.Client, prefix, first string) *twriter {
	w := &twriter{c: c, Writer: writer.Start(cl, writer.Limits{
		Prefix: prefix, Max: 20000, For: 10 * time.Minute, Every: 20 * time.Millisecond, Timeout: 2 * time.Second,
	}, first)}
	c.t.Cleanup(func() { w.Stop(); cl.Close() })
	return w
}

// Switching TLS on a running cluster and back (docs/design/14-tls.md §14.8), against real etcd processes and
// agents, each step as the hook drives it: a roll to the transition template (both schemes on the
// client port, certificates on both planes), each member asked in turn to move its peer URL
// (etcd.io/peer-scheme: its agent member-updates its own URL through its running etcd, restarts it
// listening on the new scheme), then a roll to the final template. A client of the old scheme writes
// until the peer URLs are moved, one of the new scheme from the end of the transition roll: every
// acknowledged write stays readable, and the failed ones are counted per step.
func TestMembershipTLSSwitch(t *testing.T) {
	forEachVersionParallel(t, func(t *testing.T, v string) {
		c := newPlainCluster(t, v, 3)
		var first *twriter
		c.bootstrap(&first, 3)
		healthy := func() bool { return c.voters(0, 1, 2) }
		roll := func(tls bool, transition string) time.Duration {
			took := time.Now()
			c.setTemplate(tls, transition)
			for i := range c.slots {
				require.NoError(t, c.stop(i))
				c.start(i, 0)
				// The new agent's own etcd answering, not only the others: a stopped member keeps its last
				// report (healthy) and the member list still says started, so healthy alone can hold before
				// this etcd is back, and the next stop would leave two members down.
				c.waitFor(c.slots[i].name+" back as a healthy voter", stepMax, func() bool { return c.running(i) && healthy() })
			}
			return time.Since(took)
		}
		schemes := func() map[string]string {
			out := map[string]string{}
			for _, m := range c.tryMembers() {
				out[m.Name] = schemeOf(m.PeerURL)
			}
			return out
		}
		move := func(to string) time.Duration {
			took := time.Now()
			for _, s := range c.slots {
				pid := s.etcdPID()
				c.leases.SetPeerScheme(s.lease, to)
				c.waitFor(s.name+" to move its peer URL to "+to, stepMax, func() bool {
					return schemes()[s.name] == to && healthy() && c.leases.Report(s.lease).Reason() != api.ReasonSwitchingPeerScheme
				})
				require.NotEqual(t, pid, s.etcdPID(), "%s restarted etcd to listen on %s", s.name, to)
				c.leases.SetPeerScheme(s.lease, "")
			}
			for _, s := range c.slots {
				b, err := ReadData(s.dataDir())
				require.NoError(t, err)
				require.Equal(t, to, schemeOf(b.Binding.PeerURL), "%s's binding records the peer URL it runs with", s.name)
			}
			return time.Since(took)
		}
		// peersOn waits for every peer URL in the member list to have the scheme: one list read that timed
		// out on a loaded machine is an empty map, not an answer.
		peersOn := func(scheme string) {
			want := map[string]string{}
			for _, s := range c.slots {
				want[s.name] = scheme
			}
			c.waitFor("every peer URL on "+scheme, stepMax, func() bool { return maps.Equal(schemes(), want) })
		}
		// A refusal is an answer that is not a response; a call that timed out is no answer (it would
		// pass for a refusal) and is made again.
		plaintextRefused := func() {
			hc := &http.Client{Timeout: 5 * time.Second}
			for _, s := range c.slots {
				var err error
				c.waitFor(s.name+" to answer a plaintext client", stepMax, func() bool {
					var resp *http.Response
					resp, err = hc.Get(withScheme(s.clientURL, "http") + "/health")
					if err == nil {
						resp.Body.Close()
						return true
					}
					return !timedOut(err)
				})
				require.Error(t, err, "%s refuses plaintext clients", s.name)
			}
		}

		// Switching on.
		first.Step("on: transition roll")
		rollIn := roll(false, "http")
		peersOn("http")
		tlsW := startWriterOn(c, c.clientScheme("https"), "s", "on: peer URLs")
		first.Step("on: peer URLs")
		moves := move("https")
		first.Stop() // the plaintext client moved to https
		tlsW.Step("on: final roll")
		rollOut := roll(true, "")
		plaintextRefused()
		peersOn("https")
		t.Logf("TLS on: transition roll %s, peer URLs %s, final roll %s", rollIn.Round(time.Millisecond), moves.Round(time.Millisecond), rollOut.Round(time.Millisecond))

		// And off again.
		tlsW.Step("off: transition roll")
		rollIn = roll(false, "https")
		second := startWriterOn(c, c.clientScheme("http"), "p", "off: peer URLs")
		tlsW.Step("off: peer URLs")
		moves = move("http")
		tlsW.Stop()
		second.Step("off: final roll")
		rollOut = roll(false, "")
		peersOn("http")
		t.Logf("TLS off: transition roll %s, peer URLs %s, final roll %s", rollIn.Round(time.Millisecond), moves.Round(time.Millisecond), rollOut.Round(time.Millisecond))
		second.Step("settled")
		c.waitFor("writes after the switch", stepMax, func() bool { return second.AckedInStep() >= 5 })
		t.Logf("failed writes: plaintext client %d (transition roll %d, peer URLs %d); TLS client %d (peer URLs on %d, final roll on %d, transition roll off %d, peer URLs off %d); plaintext client again %d",
			first.Failed(), first.Failed("on: transition roll"), first.Failed("on: peer URLs"), tlsW.Failed(),
			tlsW.Failed("on: peer URLs"), tlsW.Failed("on: final roll"), tlsW.Failed("off: transition roll"), tlsW.Failed("off: peer URLs"), second.Failed())
		first.Verify(t)
		tlsW.Verify(t)
		second.Verify(t)
	})
}

// One member moves its peer URL through itself (the update needs only its own vote): the switch works
// for a cluster of one, which is briefly unavailable during its restarts as in any roll.
func TestMembershipTLSSwitchOneMember(t *testing.T) {
	v := newestEtcd
	c := newPlainCluster(t, v, 1)
	c.bootstrap(nil, 1)
	s := c.slots[0]
	restart := func(tls bool, transition string) {
		c.setTemplate(tls, transition)
		require.NoError(t, c.stop(0))
		c.start(0, 0)
		c.waitFor("m0 back as a healthy voter", stepMax, func() bool { return c.running(0) && c.voters(0) })
	}
	restart(false, "http")
	c.leases.SetPeerScheme(s.lease, "https")
	c.waitFor("m0 to move its peer URL to https", stepMax, func() bool {
		ms := c.tryMembers()
		return len(ms) == 1 && schemeOf(ms[0].PeerURL) == "https" && c.voters(0) && c.leases.Report(s.lease).Reason() != api.ReasonSwitchingPeerScheme
	})
	c.leases.SetPeerScheme(s.lease, "")
	restart(true, "")
	cl := c.client()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := cl.Put(ctx, "after", "switch")
	require.NoError(t, err, "the one member serves TLS")
}
