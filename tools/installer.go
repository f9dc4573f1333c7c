package tools

import (
	"encoding/json"
	"fmt"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
)

// Request parameter names the tool stages read and write.
const (
	ParamMessages   = "messages"
	ParamTools      = "tools"
	ParamToolChoice = "tool_choice"
)

// InstallerOptions configure [NewInstaller]. A nil *InstallerOptions or a
// zero field means the default; options are copied.
type InstallerOptions struct {
	// RouterOptions give the name (default "tool-installer"), the tools
	// and handlers (map handlers run async), breaker and supervision.
	RouterOptions
	// ToolsParam is the value of the injected "tools" PARAM; default: the
	// tools in OpenAI chat format ([FunctionList]). No "tools" PARAM is
	// injected when there are no tools and no ToolsParam.
	ToolsParam json.RawMessage
	// ToolChoice, when set, is injected as the "tool_choice" PARAM (for
	// example "auto" or {"type":"function","function":{"name":"x"}}).
	ToolChoice json.RawMessage
	// SystemPrompt, when set, is prepended to the messages as a system
	// message if the first request frame is a "messages" PARAM.
	SystemPrompt string
}

// toolsParam is the value of the "tools" PARAM to inject, or nil.
func toolsParam(explicit json.RawMessage, all []*Tool) json.RawMessage {
	if len(explicit) > 0 {
		return explicit
	}
	if len(all) == 0 {
		return nil
	}
	return FunctionList(all)
}

// NewInstaller returns the spec of a tool installer around inner: on the
// first request frame it receives (one-shot, per incarnation) it injects a
// "tools" PARAM and a "tool_choice" PARAM before that frame, and, when
// that frame is a "messages" PARAM, prepends SystemPrompt to the messages
// as {"role":"system","content":...}. Later frames pass unchanged. On the
// response path it is an async router ([NewAsyncRouter]): TOOL_CALLs run
// on its tool actors and their results go into inner's sink.
func NewInstaller(inner actors.Spec, o *InstallerOptions) (actors.Spec, error) {
	var opts InstallerOptions
	if o != nil {
		opts = *o
	}
	ropts, all, err := opts.RouterOptions.prepare("tool-installer", false)
	if err != nil {
		return actors.Spec{}, err
	}
	if len(opts.ToolChoice) > 0 && !json.Valid(opts.ToolChoice) {
		return actors.Spec{}, fmt.Errorf("installer %q: tool choice is not JSON", ropts.Name)
	}
	tp := toolsParam(opts.ToolsParam, all)
	if len(tp) > 0 && !json.Valid(tp) {
		return actors.Spec{}, fmt.Errorf("installer %q: tools param is not JSON", ropts.Name)
	}
	spec := actors.Wrap(ropts.Name, inner, func() actors.Wrapped {
		r := newRouterLogic(all, ropts.Breaker)
		installed := false
		r.install = func(c actors.WrapperContext, f *messages.Frame) {
			if installed {
				c.ToInner(f)
				return
			}
			installed = true
			stream := f.GetStreamId()
			if len(tp) > 0 {
				c.ToInner(messages.RawParam(stream, ParamTools, tp))
			}
			if len(opts.ToolChoice) > 0 {
				c.ToInner(messages.RawParam(stream, ParamToolChoice, opts.ToolChoice))
			}
			if f.IsParam(ParamMessages) && opts.SystemPrompt != "" {
				list, err := decodeMessages(f.GetPayload())
				if err != nil {
					c.Logger().Warn("messages PARAM is not a JSON array; system prompt not installed", "error", err)
					c.ToInner(f)
					return
				}
				c.ToInner(messages.RawParam(stream, ParamMessages, encodeMessages(withSystem(list, opts.SystemPrompt))))
				return
			}
			c.ToInner(f)
		}
		return r
	})
	spec.Supervision = ropts.Supervision
	return spec, nil
}
