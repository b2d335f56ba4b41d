package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/etcdhook/etcdhook/api"
)

// ErrRefused marks a removal the Job must not do: its reason no longer holds, or quorum forbids it.
var ErrRefused = errors.New("refused")

// RemoveRequest is `etcdhook member remove`.
type RemoveRequest struct {
	ID        string
	PeerURL   string
	Reason    string
	Endpoints []string
	// Events receives MemberRemoved when this Job removes the member (nil: none). A member already gone
	// posts nothing: whoever removed it said so.
	Events Recorder
}

// RemoveMember removes a member through a voter after re-checking its reason and the quorum rule, moving
// leadership away first when the target leads. Removing a member that is already gone succeeds.
func RemoveMember(ctx context.Context, e *Etcd, log *slog.Logger, req RemoveRequest) error {
	id, err := api.ParseID(req.ID)
	if err != nil {
		return err
	}
	l, err := e.MemberList(ctx, req.Endpoints)
	if err != nil {
		return fmt.Errorf("reading the member list: %w", err)
	}
	var target *api.Member
	for i := range l.Members {
		if l.Members[i].ID == api.FormatID(id) {
			target = &l.Members[i]
		}
	}
	if target == nil {
		log.Info("member already removed", "member", req.ID)
		return nil
	}
	if req.PeerURL != "" && !samePeer(target.PeerURL, req.PeerURL) {
		return fmt.Errorf("%w: member %s has peer URL %s, not %s", ErrRefused, req.ID, target.PeerURL, req.PeerURL)
	}
	healthy := e.Health(ctx, l.Members)
	switch req.Reason {
	case "dead", "data-lost":
		if healthy[target.ID] != nil {
			return fmt.Errorf("%w: member %s answers as a healthy voter again; leaving it alone", ErrRefused, target.ID)
		}
	case "stuck-learner", "unwanted-learner":
		if !target.Learner {
			return fmt.Errorf("%w: member %s was promoted meanwhile", ErrRefused, target.ID)
		}
	}
	if err := QuorumAllows(l.Members, healthy, target.ID); err != nil {
		// The member may have removed itself while its health was read (a leave intent: its agent
		// removes it, and a stopping etcd answers no Status): a fresh list without it is done.
		if again, lerr := e.MemberList(ctx, req.Endpoints); lerr == nil && !hasMember(again.Members, target.ID) {
			log.Info("member removed itself meanwhile", "member", req.ID)
			return nil
		}
		return fmt.Errorf("%w: %v", ErrRefused, err)
	}
	eps := voterEndpoints(l.Members, target.ID)
	if st := healthy[target.ID]; st != nil && st.Leader == id {
		if to := transferee(l.Members, healthy, target.ID, staysLongest(target.Name)); to.ID != "" {
			toID, _ := api.ParseID(to.ID)
			if err := e.MoveLeader(ctx, target.ClientURL, toID); err != nil {
				// A leaving member's own agent moves leadership and removes itself at the same
				// time (intent leave): a call to a member that is stopping times out. Gone is done;
				// no longer leading is what the move was for.
				if again, lerr := e.MemberList(ctx, eps); lerr == nil && !hasMember(again.Members, target.ID) {
					log.Info("member removed itself meanwhile", "member", req.ID)
					return nil
				}
				if st, serr := e.Status(ctx, to.ClientURL); serr != nil || st.Leader == id || st.Leader == 0 {
					return fmt.Errorf("moving leadership away from %s: %w", target.ID, err)
				}
				log.Info("leadership moved away meanwhile", "from", target.ID)
			} else {
				log.Info("moved leadership away", "from", target.ID, "to", to.ID)
			}
		}
	}
	if len(eps) == 0 {
		eps = req.Endpoints
	}
	if err := e.Remove(ctx, eps, id); err != nil {
		return err
	}
	log.Info("member removed", "member", target.ID, "peerURL", target.PeerURL, "reason", req.Reason)
	who := target.Name
	if who == "" {
		who = "never started"
	}
	recorderOr(req.Events).Event(EventMemberRemoved, "RemoveMember",
		fmt.Sprintf("member %s (%s, peer %s) removed by Job: reason %s", target.ID, who, target.PeerURL, req.Reason), false)
	return nil
}

func hasMember(ms []api.Member, id string) bool {
	return slices.ContainsFunc(ms, func(m api.Member) bool { return m.ID == id })
}
