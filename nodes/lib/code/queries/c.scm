; C: functions, structs, unions, enums, typedefs, macros; calls and type uses.
(function_definition declarator: (function_declarator declarator: (identifier) @name.definition.function))
(function_definition declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @name.definition.function)))
(declaration declarator: (function_declarator declarator: (identifier) @name.definition.function))
(struct_specifier name: (type_identifier) @name.definition.class body: (_))
(union_specifier name: (type_identifier) @name.definition.class body: (_))
(enum_specifier name: (type_identifier) @name.definition.type body: (_))
(type_definition declarator: (type_identifier) @name.definition.type)
(preproc_function_def name: (identifier) @name.definition.macro)
(call_expression function: (identifier) @name.reference.call)
(type_identifier) @name.reference.type
