package tools

// BreakValidation gives t a validator without a compiled schema, for tests
// of a panic while arguments are validated: {} (and "") is accepted,
// validating any other arguments panics.
func BreakValidation(t *Tool) { t.validator = &validator{tool: t.def.Name, emptyOK: true} }

// EndedMax is how many of the calls the model ended by their ids a
// router keeps per stream, as the runtime does.
const EndedMax = endedMax
