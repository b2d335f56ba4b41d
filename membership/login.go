package membership

import (
	"maps"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

// Password logins (docs/design/20-auth.md §20.4, §20.5). A declared user's applications log in as one
// of two etcd users, its login slots (api.LoginSlot): the Secret names the one to use. A rotation makes
// the other slot with a new password first, then points the Secret at it and keeps the old one working
// for a grace (previous-username, previous-until), so that an application reloading its Secret within
// it is never refused; the old slot is deleted after it. etcd holds one password a user and drops the
// user's tokens when it changes, so a single user could not rotate without refusing someone.

// Login is what a user's Secret says of its password logins.
type Login struct {
	// User is the etcd user to log in as, Password its password.
	User, Password string
	// Previous and PreviousPassword: the login being replaced, which works until PreviousUntil.
	Previous, PreviousPassword string
	PreviousUntil              time.Time
	// Mark: the rotation mark the current login was made for ("" none yet).
	Mark string
}

// loginOf reads owner's login from its Secret's data; false when the Secret holds no usable one (none
// yet, or edited into something that is not one of owner's slots with a usable password).
func loginOf(owner string, data map[string][]byte) (Login, bool) {
	l := Login{User: string(data[api.SecretKeyUsername]), Password: string(data[api.SecretKeyPassword]), Mark: string(data[api.SecretKeyLoginMark])}
	if o, ok := api.SlotOwner(l.User); !ok || o != owner || !usablePassword(l.Password) {
		return Login{}, false
	}
	prev, pw := string(data[api.SecretKeyPreviousUsername]), string(data[api.SecretKeyPreviousPassword])
	until, err := time.Parse(time.RFC3339, string(data[api.SecretKeyPreviousUntil]))
	if o, ok := api.SlotOwner(prev); ok && o == owner && prev != l.User && usablePassword(pw) && err == nil {
		l.Previous, l.PreviousPassword, l.PreviousUntil = prev, pw, until
	}
	return l, true
}

// put writes l into a Secret's data (a copy; the certificate's keys are kept).
func (l Login) put(data map[string][]byte) map[string][]byte {
	out := maps.Clone(data)
	if out == nil {
		out = map[string][]byte{}
	}
	out[api.SecretKeyUsername], out[api.SecretKeyPassword] = []byte(l.User), []byte(l.Password)
	delete(out, api.SecretKeyPreviousUsername)
	delete(out, api.SecretKeyPreviousPassword)
	delete(out, api.SecretKeyPreviousUntil)
	delete(out, api.SecretKeyLoginMark)
	if l.Previous != "" {
		out[api.SecretKeyPreviousUsername], out[api.SecretKeyPreviousPassword] = []byte(l.Previous), []byte(l.PreviousPassword)
		out[api.SecretKeyPreviousUntil] = []byte(l.PreviousUntil.UTC().Format(time.RFC3339))
	}
	if l.Mark != "" {
		out[api.SecretKeyLoginMark] = []byte(l.Mark)
	}
	return out
}

// passwords are the etcd users this login needs at now, with their passwords: the current slot, and
// the previous one while its grace lasts.
func (l Login) passwords(now time.Time) map[string]string {
	out := map[string]string{l.User: l.Password}
	if l.Previous != "" && now.Before(l.PreviousUntil) {
		out[l.Previous] = l.PreviousPassword
	}
	return out
}

// retired says whether the previous login's grace is over (and the Secret still names it).
func (l Login) retired(now time.Time) bool { return l.Previous != "" && !now.Before(l.PreviousUntil) }

// next is the login a rotation to mark makes: the other slot, a new password, the current login kept
// as previous until grace from now.
func (l Login) next(owner, mark string, now time.Time, grace time.Duration) (Login, error) {
	pw, err := newPassword()
	if err != nil {
		return Login{}, err
	}
	slot := api.LoginSlot(owner, 2)
	if l.User == slot {
		slot = api.LoginSlot(owner, 1)
	}
	return Login{User: slot, Password: pw, Previous: l.User, PreviousPassword: l.Password, PreviousUntil: now.Add(grace), Mark: mark}, nil
}
