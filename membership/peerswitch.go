package membership

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

// A TLS switch's member step (docs/design/14-tls.md §14.8), the agent's half. In the transition template every
// member has certificates on both planes and serves both schemes on its client port; its peer listener
// has one scheme, the one of its own peer URL in the member list, which other members dial. Asked by
// its Lease (etcd.io/peer-scheme, one member at a time), the agent updates its own peer URL to the other
// scheme through its running etcd (member update: committed by a quorum that includes it, so a cluster
// without quorum to spare changes nothing and nothing stops), then restarts etcd listening on the new
// scheme. Whatever the hook or a hand edit asks, a member only moves while it runs the transition
// template, as a healthy voter.

// peerSwitch is this member's peer URL through a TLS switch: the URL etcd runs with, the scheme the
// Lease lets it move to, and the move itself.
type peerSwitch struct {
	*env
	// rep: a move is said before etcd stops, and only a healthy voter's (its last report) moves.
	rep *reporter

	// url: the peer URL etcd runs with now (its scheme from the member list); ask: the scheme the Lease
	// lets it move to (etcd.io/peer-scheme); failedAt: the last move that did not commit (retried 10 s
	// later).
	url, ask string
	failedAt time.Time
	// known: the last member list this agent read (the start decision's, or its running etcd's).
	known []api.Member
}

// errPeerMoved: etcd was stopped and its peer URL moved; it starts again on the new scheme.
var errPeerMoved = errors.New("peer URL moved to the other scheme")

// startURL is the peer URL etcd starts with. With certificates (TLS or the transition) it is the
// member's own URL in the member list the start decision read, whichever scheme a switch left it at;
// without an answer from the others, the URL the binding recorded (written after each move); else the
// template's. A member without certificates can only listen on http.
func (p *peerSwitch) startURL(f StartFacts) string {
	url := p.cfg.PeerURL
	if p.certs == nil {
		return url
	}
	for _, m := range f.Members {
		if samePeer(m.PeerURL, url) {
			return m.PeerURL
		}
	}
	if b := f.Data.Binding; f.Data.Present && b != nil && b.PeerURL != "" && samePeer(b.PeerURL, url) {
		return b.PeerURL
	}
	return url
}

// plaintext says whether this member may make the built-in CA although it has data (Certs.
// MayCreateCA): a TLS switch on from plaintext, before any peer URL moved (every member's peer URL in
// the member list is http), so no member's etcd trusts a CA on its peer plane yet. Once one moved, a
// missing CA Secret is not made again (its peers trust the one they started with). When no member
// answers (a cluster of one, restarting into the transition), its own binding's URL stands for the list.
func (p *peerSwitch) plaintext() bool {
	if p.cfg.Transition != "http" {
		return false
	}
	ms := p.known
	if len(ms) == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		l, err := p.etcd.MemberList(ctx, p.cfg.Endpoints)
		switch {
		case err == nil:
			ms = l.Members
		default:
			d, derr := ReadData(p.cfg.DataDir)
			if derr != nil || d.Binding == nil || d.Binding.PeerURL == "" {
				return false
			}
			ms = []api.Member{{PeerURL: d.Binding.PeerURL}}
		}
	}
	for _, m := range ms {
		if schemeOf(m.PeerURL) != "http" {
			return false
		}
	}
	return len(ms) > 0
}

// peerArgs sets the scheme of etcd's peer listener and its advertised peer URL to url's.
func peerArgs(args []string, url string) []string {
	out := make([]string, len(args))
	for i, arg := range args {
		switch {
		case strings.HasPrefix(arg, "--listen-peer-urls="):
			v := strings.TrimPrefix(arg, "--listen-peer-urls=")
			arg = "--listen-peer-urls=" + withScheme(v, schemeOf(url))
		case strings.HasPrefix(arg, "--initial-advertise-peer-urls="):
			arg = "--initial-advertise-peer-urls=" + url
		}
		out[i] = arg
	}
	return out
}

// due: the Lease asks this member to move its peer URL to the scheme it does not run, and it
// may: the transition template (certificates on both planes), a voter with a member list.
func (p *peerSwitch) due() bool {
	return p.cfg.Transition != "" && p.certs != nil && p.ask != "" && p.url != "" &&
		p.ask != schemeOf(p.url) && p.rep.last.IsVoter() && p.rep.last.Healthy && p.rep.last.MemberID != "" &&
		time.Since(p.failedAt) > 10*time.Second
}

// stillAsked reads the Lease again right before stopping etcd: the hook may have moved the turn
// to another member since the last look (only one moves at a time).
func (p *peerSwitch) stillAsked(ctx context.Context) bool {
	in, err := p.store.Read(ctx)
	if err != nil {
		return false
	}
	p.ask = in.PeerScheme
	return p.due()
}

// move updates this member's (self's) peer URL to scheme `to` through its own running etcd and
// records it in the binding (url is the new URL then). On failure the member list keeps the old
// URL (the update is checked against it when its answer is lost).
func (p *peerSwitch) move(ctx context.Context, to, self string) error {
	id, err := api.ParseID(self)
	if err != nil {
		return fmt.Errorf("moving the peer URL: %w", err)
	}
	url := withScheme(p.url, to)
	eps := []string{p.cfg.ClientURL}
	uctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = p.etcd.UpdatePeerURL(uctx, eps, id, url)
	cancel()
	if err != nil {
		p.event(EventPeerURLUpdated, "UpdatePeerURL", true, "could not move the peer URL of member %s to %s: %v", self, url, err)
		return fmt.Errorf("moving the peer URL to %s: %w", url, err)
	}
	if df, err := ReadData(p.cfg.DataDir); err == nil && df.Binding != nil {
		b := *df.Binding
		b.PeerURL = url
		if err := WriteBinding(p.cfg.DataDir, b); err != nil {
			p.log.Warn("peer URL moved; the binding keeps the old one (the member list says the new one)", "error", err)
		}
	}
	p.url = url
	p.log.Info("peer URL moved", "member", self, "peerURL", url)
	p.event(EventPeerURLUpdated, "UpdatePeerURL", false, "member %s moved its peer URL to %s (TLS switch)", self, url)
	return nil
}

// UpdatePeerURL sets member id's peer URL to url through eps (the other voters).
func (e *Etcd) UpdatePeerURL(ctx context.Context, eps []string, id uint64, url string) error {
	return e.retry(ctx, OpUpdate, "update the peer URL of "+api.FormatID(id), func(ctx context.Context) error {
		c, err := e.client(eps)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.MemberUpdate(ctx, id, []string{url})
		e.tokenRefused(err) // the retry logs in afresh
		return err
	}, func(ctx context.Context) (bool, error) {
		l, err := e.MemberList(ctx, eps)
		if err != nil {
			return false, err
		}
		for _, m := range l.Members {
			if m.ID == api.FormatID(id) {
				return m.PeerURL == url, nil
			}
		}
		return false, fmt.Errorf("member %s is not in the member list", api.FormatID(id))
	})
}
