package plugin

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/etcdhook/etcdhook/api"
)

// runRotateUser asks for a new key, certificate and password login for one user of spec.auth (annotation
// etcd.io/rotate-user=USER=TOKEN, docs/design/20-auth.md §20.5) and, with --wait, follows
// status.auth.users until the user's certificate is a new one (its expiry moved).
func runRotateUser(ctx context.Context, env Env, args []string) error {
	o, fs := requestFlagSet("rotate-user", env, requestFlags{
		idHelp:   "the rotation's token (default: the current time, in nanoseconds); use a value never used before",
		waitHelp: "wait until the user's Secret holds a new certificate",
		timeout:  5 * time.Minute,
	})
	if err := fs.Parse(args); err != nil {
		return parseErr(err)
	}
	if len(fs.Args()) != 2 {
		return &ExitError{Code: 2, Err: fmt.Errorf("rotate-user: NAME and USER expected, got %d arguments", len(fs.Args()))}
	}
	o.name = fs.Args()[0]
	user := fs.Args()[1]
	o.defaultToken(env, true)
	c, u, err := o.cluster(ctx, env)
	if err != nil {
		return err
	}
	if !declaresUser(u, user) {
		return fmt.Errorf("rotate-user: %s/%s declares no user %q in spec.auth.users", c.Namespace, o.name, user)
	}
	value := user + "=" + o.token
	if u.GetAnnotations()[api.AnnRotateUser] == value {
		return fmt.Errorf("rotate-user: %s/%s already carries %s=%s: use a value never used before", c.Namespace, o.name, api.AnnRotateUser, value)
	}
	before := userNotAfter(u, user)
	if err := annotate(ctx, c, o.name, api.AnnRotateUser, &value); err != nil {
		return err
	}
	fmt.Fprintf(env.Out, "rotation %q of user %s of %s/%s requested (the old certificate stays valid until it expires, the old password login for the rotation grace)\n", o.token, user, c.Namespace, o.name)
	if !o.wait {
		return nil
	}
	return o.follow(ctx, env, c, func(snap *Snapshot) (bool, error) {
		now := snapUserNotAfter(snap, user)
		if now == "" || now == before {
			return false, nil
		}
		fmt.Fprintf(env.Out, "done: user %s's Secret holds a new certificate (expires %s)\n", user, now)
		return true, nil
	}, func() error {
		return fmt.Errorf("timed out after %s waiting for user %s's new certificate (status.auth.users and the AuthOutOfSync condition say why)", o.timeout, user)
	})
}

// declaresUser says whether the EtcdCluster's spec.auth declares user.
func declaresUser(u *unstructured.Unstructured, user string) bool {
	users, _, _ := unstructured.NestedSlice(u.Object, "spec", "auth", "users")
	for _, x := range users {
		if m, ok := x.(map[string]any); ok && m["name"] == user {
			return true
		}
	}
	return false
}

// userNotAfter is the user's certificate expiry in status.auth.users ("" when none yet).
func userNotAfter(u *unstructured.Unstructured, user string) string {
	users, _, _ := unstructured.NestedSlice(u.Object, "status", "auth", "users")
	return notAfterIn(users, user)
}

func snapUserNotAfter(s *Snapshot, user string) string {
	a, _ := s.Status["auth"].(map[string]any)
	users, _ := a["users"].([]any)
	return notAfterIn(users, user)
}

func notAfterIn(users []any, user string) string {
	for _, x := range users {
		if m, ok := x.(map[string]any); ok && m["name"] == user {
			s, _ := m["notAfter"].(string)
			return s
		}
	}
	return ""
}
