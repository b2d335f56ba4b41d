package plugin

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/etcdhook/etcdhook/api"
)

// runPromote promotes a standby (docs/design/21-standby.md §21.6): the etcd.io/promote annotation with a
// token; the hook stops the applier, records status.standby.promoted and lifts the write fence. With
// --wait it follows until the promotion is recorded and the cluster is Available with every member
// healthy. A standby promoted already (by any token) stays as it is: the command says so.
func runPromote(ctx context.Context, env Env, args []string) error {
	o, c, u, err := startRequest(ctx, "promote", env, args, requestFlags{
		idHelp:   "the promotion's token, the annotation's value (default: the current time)",
		waitHelp: "wait until the promoted cluster is Available with every member healthy",
		timeout:  10 * time.Minute,
	})
	if err != nil {
		return err
	}
	if _, found, _ := unstructured.NestedMap(u.Object, "spec", "standby"); !found {
		return fmt.Errorf("promote: %s/%s has no spec.standby (it is no standby)", c.Namespace, o.name)
	}
	if snap, err := snapshotOf(u); err == nil && snap.status.Standby != nil && snap.status.Standby.Promoted != nil {
		p := snap.status.Standby.Promoted
		fmt.Fprintf(env.Out, "%s/%s was promoted already (token %q at %s, revision %d): nothing to do\n", c.Namespace, o.name, p.Token, p.Time.UTC().Format(time.RFC3339), p.Revision)
		return nil
	}
	if err := o.ask(ctx, env, c, api.AnnPromote, "promotion %q of %s/%s requested"); err != nil || !o.wait {
		return err
	}
	said := false
	return o.follow(ctx, env, c, func(snap *Snapshot) (bool, error) {
		sb := snap.status.Standby
		if sb == nil || sb.Promoted == nil {
			return false, nil
		}
		if !said {
			said = true
			fmt.Fprintf(env.Out, "promoted at revision %d (the primary's newest seen: %d); the write fence is lifted\n", sb.Promoted.Revision, sb.Promoted.PrimaryNewestRevision)
		}
		healthy := len(snap.status.Members) > 0
		for _, m := range snap.status.Members {
			healthy = healthy && m.Healthy
		}
		if meta.IsStatusConditionTrue(snap.status.Conditions, api.CondAvailable) && healthy {
			fmt.Fprintf(env.Out, "done: %s/%s is Available with every member healthy, %s after the request\n", c.Namespace, o.name, env.Now().Sub(o.asked).Round(time.Second))
			return true, nil
		}
		return false, nil
	}, func() error {
		return fmt.Errorf("timed out after %s waiting for the promotion %q of %s/%s", o.timeout, o.token, c.Namespace, o.name)
	})
}
