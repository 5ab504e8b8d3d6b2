; C++: the C tags plus classes, namespaces, methods (qualified and in class bodies); calls and types.
(function_definition declarator: (function_declarator declarator: (identifier) @name.definition.function))
(function_definition declarator: (function_declarator declarator: (field_identifier) @name.definition.method))
(function_definition declarator: (function_declarator declarator: (qualified_identifier name: (identifier) @name.definition.method)))
(field_declaration declarator: (function_declarator declarator: (field_identifier) @name.definition.method))
(declaration declarator: (function_declarator declarator: (identifier) @name.definition.function))
(class_specifier name: (type_identifier) @name.definition.class body: (_))
(struct_specifier name: (type_identifier) @name.definition.class body: (_))
(enum_specifier name: (type_identifier) @name.definition.type body: (_))
(type_definition declarator: (type_identifier) @name.definition.type)
(namespace_definition name: (namespace_identifier) @name.definition.module)
(preproc_function_def name: (identifier) @name.definition.macro)
(call_expression function: [(identifier) @name.reference.call
                            (field_expression field: (field_identifier) @name.reference.call)
                            (qualified_identifier name: (identifier) @name.reference.call)])
(type_identifier) @name.reference.type
