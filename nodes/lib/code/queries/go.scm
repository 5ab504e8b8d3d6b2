; Go: functions, methods, types; calls, selectors and type uses.
(function_declaration name: (identifier) @name.definition.function)
(method_declaration name: (field_identifier) @name.definition.method)
(type_spec name: (type_identifier) @name.definition.type)
(call_expression function: [(identifier) @name.reference.call
                            (selector_expression field: (field_identifier) @name.reference.call)])
(type_identifier) @name.reference.type
