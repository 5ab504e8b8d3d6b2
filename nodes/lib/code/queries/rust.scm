; Rust: structs, enums, unions, traits, type aliases, functions, macros, modules, impls; calls,
; macro uses, type uses.
(struct_item name: (type_identifier) @name.definition.class)
(enum_item name: (type_identifier) @name.definition.class)
(union_item name: (type_identifier) @name.definition.class)
(type_item name: (type_identifier) @name.definition.type)
(trait_item name: (type_identifier) @name.definition.interface)
(function_item name: (identifier) @name.definition.function)
(function_signature_item name: (identifier) @name.definition.function)
(macro_definition name: (identifier) @name.definition.macro)
(mod_item name: (identifier) @name.definition.module)
(impl_item type: (type_identifier) @name.definition.impl)
(call_expression function: [(identifier) @name.reference.call
                            (field_expression field: (field_identifier) @name.reference.call)
                            (scoped_identifier name: (identifier) @name.reference.call)])
(macro_invocation macro: (identifier) @name.reference.call)
(type_identifier) @name.reference.type
