package sync

import "github.com/etcdhook/etcdhook/sync/wire"

// The request as package wire types it (sync/wire: body → Observed; answer → bytes).
type (
	Request        = wire.Request
	Observed       = wire.Observed
	InputError     = wire.InputError
	MalformedError = wire.MalformedError
)
