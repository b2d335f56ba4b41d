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

// errPeerMoved: etcd was stopped and its peer URL moved; it starts again on the new scheme.
var errPeerMoved = errors.New("peer URL moved to the other scheme")

// withScheme is url with scheme ("http" or "https") in place of its own.
func withScheme(url, scheme string) string {
	_, rest, ok := strings.Cut(url, "://")
	if !ok {
		return url
	}
	return scheme + "://" + rest
}

func schemeOf(url string) string {
	if strings.HasPrefix(url, "https://") {
		return "https"
	}
	return "http"
}

// startPeerURL is the peer URL etcd starts with. With certificates (TLS or the transition) it is the
// member's own URL in the member list the start decision read, whichever scheme a switch left it at;
// without an answer from the others, the URL the binding recorded (written after each move); else the
// template's. A member without certificates can only listen on http.
func (a *Agent) startPeerURL(f StartFacts) string {
	url := a.Cfg.PeerURL
	if a.Certs == nil {
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

// PeersPlaintext says whether this member may make the built-in CA although it has data (Certs.
// MayCreateCA): a TLS switch on from plaintext, before any peer URL moved (every member's peer URL in
// the member list is http), so no member's etcd trusts a CA on its peer plane yet. Once one moved, a
// missing CA Secret is not made again (its peers trust the one they started with). When no member
// answers (a cluster of one, restarting into the transition), its own binding's URL stands for the list.
func (a *Agent) PeersPlaintext() bool {
	if a.Cfg.Transition != "http" {
		return false
	}
	ms := a.known
	if len(ms) == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		l, err := a.Etcd.MemberList(ctx, a.Cfg.Endpoints)
		switch {
		case err == nil:
			ms = l.Members
		default:
			d, derr := ReadData(a.Cfg.DataDir)
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

// peerMoveDue: the Lease asks this member to move its peer URL to the scheme it does not run, and it
// may: the transition template (certificates on both planes), a voter with a member list.
func (a *Agent) peerMoveDue() bool {
	return a.Cfg.Transition != "" && a.Certs != nil && a.peerAsk != "" && a.peerURL != "" &&
		a.peerAsk != schemeOf(a.peerURL) && a.rep.last.IsVoter() && a.rep.last.Healthy && a.rep.last.MemberID != "" &&
		time.Since(a.peerMoveFailed) > 10*time.Second
}

// peerMoveStillAsked reads the Lease again right before stopping etcd: the hook may have moved the turn
// to another member since the last look (only one moves at a time).
func (a *Agent) peerMoveStillAsked(ctx context.Context) bool {
	in, err := a.Store.Read(ctx)
	if err != nil {
		return false
	}
	a.peerAsk = in.PeerScheme
	return a.peerMoveDue()
}

// movePeerURL updates this member's (self's) peer URL to scheme `to` through its own running etcd and
// records it in the binding (a.peerURL is the new URL then). On failure the member list keeps the old
// URL (the update is checked against it when its answer is lost).
func (a *Agent) movePeerURL(ctx context.Context, to, self string) error {
	id, err := api.ParseID(self)
	if err != nil {
		return fmt.Errorf("moving the peer URL: %w", err)
	}
	url := withScheme(a.peerURL, to)
	eps := []string{a.Cfg.ClientURL}
	uctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = a.Etcd.UpdatePeerURL(uctx, eps, id, url)
	cancel()
	if err != nil {
		a.env.event(EventPeerURLUpdated, "UpdatePeerURL", true, "could not move the peer URL of member %s to %s: %v", self, url, err)
		return fmt.Errorf("moving the peer URL to %s: %w", url, err)
	}
	if df, err := ReadData(a.Cfg.DataDir); err == nil && df.Binding != nil {
		b := *df.Binding
		b.PeerURL = url
		if err := WriteBinding(a.Cfg.DataDir, b); err != nil {
			a.Log.Warn("peer URL moved; the binding keeps the old one (the member list says the new one)", "error", err)
		}
	}
	a.peerURL = url
	a.Log.Info("peer URL moved", "member", self, "peerURL", url)
	a.env.event(EventPeerURLUpdated, "UpdatePeerURL", false, "member %s moved its peer URL to %s (TLS switch)", self, url)
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
